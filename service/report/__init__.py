"""The results page of an experiment: its data (:mod:`.data`), Bokeh figures (:mod:`.plots`) and HTML (:mod:`.page`).

The service serves it at ``GET /experiments/{id}/report`` (:mod:`service.routes.report`); ``polis report
RUN_DIR -o report.html`` writes the same page as one standalone file.
"""

from __future__ import annotations

from service.report.data import NotARunError, ReportData, is_run_dir, load_report
from service.report.page import mount_bokeh_static, served_page, standalone_page

__all__ = ["NotARunError", "ReportData", "is_run_dir", "load_report", "mount_bokeh_static", "served_page", "standalone_page"]
