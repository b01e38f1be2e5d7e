"""``/experiments/{id}/report``: the experiment's results page (HTML), and the data its plots refresh from."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from engine.api import ReportData, is_run_dir, load_report
from service.admission.auth import Caller
from service.registry import ACTIVE_STATUSES, ExperimentRecord
from service.report.page import served_page
from service.report.plots import layout_signature
from service.state import ServiceState, State

__all__ = ["router"]

router = APIRouter(prefix="/experiments", tags=["results"])


def _record_facts(record: ExperimentRecord) -> dict[str, Any]:
    """What the service adds to the run's own summary: the experiment, its owner and its timings."""
    facts: dict[str, Any] = {"status": str(record.status), "experiment": record.id, "owner": record.owner,
                             "created": record.created_at.isoformat(timespec="seconds")}
    if record.started_at is not None:
        facts["started"] = record.started_at.isoformat(timespec="seconds")
    if record.finished_at is not None:
        facts["finished"] = record.finished_at.isoformat(timespec="seconds")
    if record.duration_s is not None:
        facts["duration (s)"] = round(record.duration_s, 2)
    if record.error:
        facts["error"] = record.error
    return facts


def _report(record: ExperimentRecord, state: ServiceState) -> ReportData:
    facts = _record_facts(record)
    if not is_run_dir(record.run_dir):  # queued: the run has written nothing yet
        return ReportData(title=record.name, summary=facts, errors=(), panels=(), datasets=(), extra=facts)
    return load_report(record.run_dir, state.query_limits, extra=facts)


# Plain ``def`` routes: the DuckDB reads run in the threadpool, off the event loop.
@router.get("/{experiment_id}/report", response_class=HTMLResponse,
            responses={200: {"content": {"text/html": {}}, "description": "the results page"}})
def get_report(experiment_id: str, state: State, caller: Caller) -> HTMLResponse:
    """The experiment's results page: summary, errors, per-tick plots, env and questionnaire series, the
    dataset browser and a SQL box. BokehJS comes from this service (no CDN); while the experiment runs, the
    page follows its event stream and refreshes the plots from ``/report/data``."""
    record = state.registry.get(experiment_id, caller)
    return HTMLResponse(served_page(_report(record, state), record.id, live=record.status in ACTIVE_STATUSES))


@router.get("/{experiment_id}/report/data")
def get_report_data(experiment_id: str, state: State, caller: Caller) -> dict[str, Any]:
    """What the results page shows, as JSON: ``report`` (summary, errors, panels with their lines, datasets)
    and ``signature`` (the panels, lines and bar categories, to tell an in-place update from a new layout)."""
    data = _report(state.registry.get(experiment_id, caller), state)
    return {"signature": layout_signature(data), "report": data.to_json()}
