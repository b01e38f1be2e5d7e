"""``/experiments``: submit a spec, list and watch experiments, cancel one, download its datasets."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from fastapi import APIRouter, Response
from fastapi.responses import FileResponse
from starlette.background import BackgroundTask

from engine.spec import ExperimentSpec
from service.results import check_dataset_name, export_dataset, list_datasets
from service.schemas import DatasetList, ExperimentBrief, ExperimentDetail, ExperimentList
from service.state import State

__all__ = ["PARQUET_MEDIA_TYPE", "router"]

#: The registered media type of Parquet files.
PARQUET_MEDIA_TYPE = "application/vnd.apache.parquet"

router = APIRouter(prefix="/experiments", tags=["experiments"])


@router.post("", status_code=201, response_model=ExperimentDetail)
async def submit_experiment(spec: ExperimentSpec, state: State, response: Response) -> ExperimentDetail:
    """Validate an experiment spec, register it and start running it.

    An invalid spec is answered with 422; each ``detail`` item's ``loc`` names the field path,
    e.g. ``["body", "agents", 0, "id"]``.
    """
    record = state.registry.create(spec)
    state.submitter.submit(record, spec)
    response.headers["Location"] = f"/experiments/{record.id}"
    return ExperimentDetail.from_record(record, state.dashboard_link)


@router.get("", response_model=ExperimentList)
async def list_experiments(state: State) -> ExperimentList:
    """List every experiment, newest first."""
    return ExperimentList(experiments=[ExperimentBrief.from_record(r) for r in state.registry.records()])


@router.get("/{experiment_id}", response_model=ExperimentDetail)
async def get_experiment(experiment_id: str, state: State) -> ExperimentDetail:
    """One experiment: status, progress, error, spec, and the Dask dashboard to watch it on."""
    return ExperimentDetail.from_record(state.registry.get(experiment_id), state.dashboard_link)


@router.post("/{experiment_id}/cancel", status_code=202, response_model=ExperimentDetail)
async def cancel_experiment(experiment_id: str, state: State) -> ExperimentDetail:
    """Ask a queued or running experiment to stop; it ends ``cancelled``. 409 if it has finished."""
    state.submitter.cancel(experiment_id)
    return ExperimentDetail.from_record(state.registry.get(experiment_id), state.dashboard_link)


# Plain ``def`` routes: DuckDB and Parquet work runs in the threadpool, off the event loop.
@router.get("/{experiment_id}/datasets", response_model=DatasetList)
def get_datasets(experiment_id: str, state: State) -> DatasetList:
    """The experiment's datasets: name, kind, committed row count and columns."""
    record = state.registry.get(experiment_id)
    return DatasetList(experiment_id=record.id, datasets=list_datasets(record.run_dir, state.query_limits))


@router.get(
    "/{experiment_id}/datasets/{name}.parquet",
    response_class=FileResponse,
    responses={200: {"content": {PARQUET_MEDIA_TYPE: {}}, "description": "the dataset as one Parquet file"}},
)
def download_dataset(experiment_id: str, name: str, state: State) -> FileResponse:
    """Download every committed row of one dataset as a single Parquet file."""
    record = state.registry.get(experiment_id)
    check_dataset_name(record.id, name)
    fd, tmp_name = tempfile.mkstemp(prefix="polis-download-", suffix=".parquet")
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        export_dataset(record.id, record.run_dir, name, tmp, state.query_limits)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return FileResponse(
        tmp,
        media_type=PARQUET_MEDIA_TYPE,
        filename=f"{record.id}_{name}.parquet",
        background=BackgroundTask(tmp.unlink, missing_ok=True),
    )
