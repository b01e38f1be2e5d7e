"""Bokeh figures of the results page, one per :class:`~service.report.series.Panel`.

Each line's data lives in a ``ColumnDataSource`` named ``<panel key>/<line index>`` with columns ``x``
and ``y``: the served page refreshes exactly those sources from ``GET /experiments/{id}/report/data``
while a run goes on. :func:`layout_signature` says which sources and categories a page has, so the page
can tell an update it can apply in place from one that needs a fresh page (a new plot, a new line).
"""

from __future__ import annotations

from typing import Any

from bokeh.layouts import gridplot
from bokeh.models import ColumnDataSource, FactorRange, HoverTool
from bokeh.models.annotations import Legend, Title
from bokeh.palettes import Category10_10
from bokeh.plotting import figure

from engine.api import Panel, ReportData

__all__ = ["PLOT_HEIGHT", "PLOT_WIDTH", "build_sections", "layout_signature", "source_name"]

PLOT_WIDTH = 380  #: three columns of plots fit a 1,280 px window (tests/service/report: checked in Chromium)
PLOT_HEIGHT = 280
#: Plots per row of a section.
_COLUMNS = 3


def source_name(panel: Panel, index: int) -> str:
    """The name of the data source of line ``index`` of ``panel``."""
    return f"{panel.key}/{index}"


def _factors(panel: Panel) -> list[Any]:
    """A bar panel's categories: each answer, and in a sweep each cell's bar beside it (lines share the answers)."""
    if not panel.bars or not panel.lines:
        return []
    return [line.x[i] for i in range(len(panel.lines[0].x)) for line in panel.lines]


def layout_signature(data: ReportData) -> list[Any]:
    """What the page's figures are built from besides the values: panels, their lines and bar categories."""
    return [[p.key, [line.label for line in p.lines], [list(x) if isinstance(x, tuple) else x for x in _factors(p)]]
            for p in data.panels]


def _figure(panel: Panel) -> Any:
    # A legend below takes its rows from the plot's height: give them room.
    legend_rows = len(panel.lines) if len(panel.lines) > 1 else 0
    common: dict[str, Any] = {
        "title": panel.title, "width": PLOT_WIDTH, "height": PLOT_HEIGHT + 17 * legend_rows, "name": panel.key,
        "x_axis_label": panel.x_label, "y_axis_label": panel.y_label, "tools": "pan,wheel_zoom,box_zoom,reset,save",
        "toolbar_location": "above",
    }
    if panel.bars:
        return figure(x_range=FactorRange(*_factors(panel)), **common)
    if panel.log:
        return figure(x_axis_type="log", y_axis_type="log", **common)
    return figure(**common)


def _draw(panel: Panel, colors: dict[str, int]) -> Any:
    fig = _figure(panel)
    items = []
    for i, line in enumerate(panel.lines):
        color = Category10_10[colors.get(line.label, i) % len(Category10_10)]
        source = ColumnDataSource({"x": list(line.x), "y": list(line.y)}, name=source_name(panel, i))
        if panel.bars:
            renderers = [fig.vbar(x="x", top="y", width=0.8, source=source, color=color, name=line.label)]
        else:
            renderers = [fig.line("x", "y", source=source, color=color, line_width=2, name=line.label),
                         fig.scatter("x", "y", source=source, color=color, size=6, name=line.label)]
        items.append((line.label, renderers))
    if panel.bars:
        fig.xaxis.major_label_orientation = 0.9 if any(isinstance(x, tuple) for x in panel.lines[0].x) else 0
        fig.y_range.start = 0
    else:
        fig.xaxis.ticker.min_interval = 1  # steps are whole numbers
        fig.xgrid.ticker = fig.xaxis[0].ticker
    if panel.description:
        fig.add_layout(Title(text=panel.description, text_font_style="italic", text_font_size="8pt"), "above")
    fig.add_tools(HoverTool(tooltips=[("", "$name"), (panel.x_label, "@x"), (panel.y_label, "@y")]))
    if len(items) > 1:
        legend = Legend(items=items, click_policy="hide", label_text_font_size="8pt", spacing=0)
        fig.add_layout(legend, "below")
    return fig


def build_sections(data: ReportData) -> dict[str, Any]:
    """Every panel's figure, in one grid per page section (``Run``, each env module, each questionnaire).

    Returns:
        Section name -> its grid of figures, in page order (empty when the data has no panels).
    """
    sections: dict[str, list[Panel]] = {}
    for panel in data.panels:
        sections.setdefault(panel.group, []).append(panel)
    # A sweep's cell keeps its colour in every plot, also where some cells have no line.
    colors = {cell["label"]: i for i, cell in enumerate(data.cells)}
    return {group: gridplot([_draw(p, colors) for p in panels], ncols=_COLUMNS, toolbar_location=None)
            for group, panels in sections.items()}
