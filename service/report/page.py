"""The results page as one HTML document: served by the service, or standalone for ``polis report``.

Both come from the template ``templates/report.html`` and the same :class:`~engine.results.ReportData`:

- **served** (:func:`served_page`): BokehJS is loaded from the service itself (:data:`BOKEH_STATIC_URL`,
  the files shipped in the bokeh wheel, mounted by :func:`mount_bokeh_static`), never from a CDN; the page
  adds the SQL box and follows the experiment's event stream while it runs.
- **standalone** (:func:`standalone_page`): BokehJS is inlined, and the page refers to no URL at all,
  so the file opens offline, e.g. from a paper's supplement.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import jinja2
from bokeh.embed import components
from bokeh.resources import Resources
from bokeh.util.paths import bokehjs_path
from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from engine.api import ReportData
from service.report.plots import build_sections, layout_signature

__all__ = ["BOKEH_STATIC_URL", "SQL_EXAMPLE", "SWEEP_SQL_EXAMPLE", "mount_bokeh_static", "served_page", "standalone_page"]

#: Where the service serves bokeh's own static files; Bokeh's ``server`` resources add ``static/js/...``.
BOKEH_STATIC_URL = "/static/bokeh/"
#: The SQL box's first query (a sweep's compares cells).
SQL_EXAMPLE = "SELECT step, status, count(*) AS agent_steps FROM actions GROUP BY ALL ORDER BY step, status"
SWEEP_SQL_EXAMPLE = "SELECT cell, status, count(*) AS agent_steps FROM actions GROUP BY ALL ORDER BY cell, status"
#: Rows the SQL box asks for (the service's own limit may be lower).
SQL_BOX_ROWS = 200
_TEMPLATES = Path(__file__).parent / "templates"


@cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(_TEMPLATES), autoescape=True, undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def mount_bokeh_static(app: FastAPI) -> None:
    """Serve the BokehJS files of the installed bokeh package under :data:`BOKEH_STATIC_URL`."""
    app.mount(f"{BOKEH_STATIC_URL}static", StaticFiles(directory=bokehjs_path()), name="bokeh-static")


def _render(data: ReportData, resources: Resources, served: bool, config: dict[str, Any]) -> str:
    sections = build_sections(data)
    script, divs = components(sections) if sections else ("", {})
    return _environment().get_template("report.html").render(
        report=data, served=served, bokeh_js=resources.render_js() if sections else "", plots_script=script,
        plot_divs=divs, css=(_TEMPLATES / "report.css").read_text(encoding="utf-8"),
        js=(_TEMPLATES / "report.js").read_text(encoding="utf-8"), sql_example=SWEEP_SQL_EXAMPLE if data.is_sweep else SQL_EXAMPLE,
        config={"signature": layout_signature(data), **config},
    )


def served_page(data: ReportData, experiment_id: str, live: bool) -> str:
    """The page the service answers ``GET /experiments/{id}/report`` with.

    Args:
        data: what to show.
        experiment_id: the experiment; the page's data, SQL and event URLs are under ``/experiments/{id}``.
        live: the experiment is queued or running: the page follows its event stream and refreshes its
            plots on every ``tick`` event, until the ``final`` one.
    """
    base = f"/experiments/{experiment_id}"
    config = {"live": live, "data_url": f"{base}/report/data", "sql_url": f"{base}/sql", "events_url": f"{base}/events",
              "sql_max_rows": SQL_BOX_ROWS}
    return _render(data, Resources(mode="server", root_url=BOKEH_STATIC_URL, components=["bokeh"]), True, config)


def standalone_page(data: ReportData) -> str:
    """The page as one self-contained file: BokehJS inline, no SQL box, no live updates, no URL."""
    return _render(data, Resources(mode="inline", components=["bokeh"]), False, {"live": False})
