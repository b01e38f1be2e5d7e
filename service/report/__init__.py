"""The results page of an experiment: Bokeh figures (:mod:`.plots`) and HTML (:mod:`.page`) of the data
the engine reads (:func:`engine.results.load_report`).

The service serves it at ``GET /experiments/{id}/report`` (:mod:`service.routes.report`); ``polis report
RUN_DIR -o report.html`` writes the same page as one standalone file.
"""

from __future__ import annotations

from service.report.page import mount_bokeh_static, served_page, standalone_page

__all__ = ["mount_bokeh_static", "served_page", "standalone_page"]
