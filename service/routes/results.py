"""``/experiments/{id}/datasets``: an experiment's results: the dataset catalogue and Parquet downloads."""

from __future__ import annotations

import os
import tempfile
from dataclasses import asdict
from pathlib import Path

from fastapi import APIRouter
from fastapi.responses import FileResponse
from starlette.background import BackgroundTask

from engine.api import check_dataset_name, export_dataset, fidelity, list_datasets, regression_fidelity
from engine.spec_regression import RegressionSpec
from service.admission.auth import Caller
from service.compute import Deadline
from service.schemas import (
    DatasetList,
    FidelityFigure,
    FidelityRequest,
    FidelityResult,
    RegressionCoefficient,
    RegressionFidelity,
    RegressionRequest,
)
from service.sql import PARQUET_MEDIA_TYPE
from service.state import State

__all__ = ["router"]

router = APIRouter(prefix="/experiments", tags=["results"])


# Plain ``def`` routes: DuckDB and Parquet work runs in the threadpool, off the event loop. The fidelity scoring, which
# can take minutes, runs on a pool of its own (``state.fidelity_work``) so it never fills that shared one.
@router.get("/{experiment_id}/datasets", response_model=DatasetList)
def get_datasets(experiment_id: str, state: State, caller: Caller) -> DatasetList:
    """The experiment's datasets: name, kind, committed row count and columns."""
    record = state.registry.get(experiment_id, caller)
    return DatasetList(experiment_id=record.id, datasets=list_datasets(record.run_dir, state.query_limits))


@router.get(
    "/{experiment_id}/datasets/{name}.parquet",
    response_class=FileResponse,
    responses={200: {"content": {PARQUET_MEDIA_TYPE: {}}, "description": "the dataset as one Parquet file"}},
)
def download_dataset(experiment_id: str, name: str, state: State, caller: Caller) -> FileResponse:
    """Download every committed row of one dataset as a single Parquet file."""
    record = state.registry.get(experiment_id, caller)
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


@router.post("/{experiment_id}/fidelity", response_model=FidelityResult)
async def score_fidelity(experiment_id: str, request: FidelityRequest, state: State, caller: Caller) -> FidelityResult:
    """Score a survey experiment's simulated answers against its respondents' real ones (422 names an item that
    cannot be scored, or a run with no survey); the figures are also written as its ``fidelity`` dataset.

    The scoring runs on the scorings' own threads, at most ``POLIS_FIDELITY_MAX_CONCURRENT_PER_OWNER`` of an owner's
    at once (and ``POLIS_FIDELITY_MAX_CONCURRENT`` in all; more are 429), and is stopped past
    ``POLIS_FIDELITY_TIMEOUT_S`` (422, naming the limit; nothing is written then). ``bootstrap`` is at most 2000, and
    ``by`` names each field once (422 at ``by.N``).

    With a ``regression``, it is also fitted on the real and on the simulated answers (first: a formula naming a
    column that is neither a persona field nor a target, a collinear design or fewer than 10 respondents per
    coefficient is a 422 at ``regression.formula`` before any resample), and its coefficients come back beside the
    figures and are written as the ``regression_fidelity`` dataset.
    """
    record = state.registry.get(experiment_id, caller)

    def score(deadline: Deadline) -> FidelityResult:
        regression = None
        if request.regression is not None:
            regression = _fit(record.run_dir, request.regression, request.questionnaire_id, deadline)
        report = fidelity(record.run_dir, by=request.by, questionnaire_id=request.questionnaire_id,
                          bootstrap=request.bootstrap, seed=request.seed, retest=request.retest, checkpoint=deadline.check)
        return FidelityResult(experiment_id=record.id, questionnaire_id=report.questionnaire_id,
                              bootstrap=report.bootstrap, figures=[FidelityFigure(**row) for row in report.rows()],
                              regression=regression)

    return await state.fidelity_work.run(caller.owner, score)


@router.post("/{experiment_id}/regression", response_model=RegressionFidelity)
async def fit_regression(experiment_id: str, request: RegressionRequest, state: State, caller: Caller) -> RegressionFidelity:
    """Fit a regression on a survey experiment's real answers and on its simulated ones and compare each coefficient,
    without scoring (or rewriting) its fidelity figures; written as its ``regression_fidelity`` dataset. A formula
    that cannot be fitted is a 422 at ``regression.formula``; it runs on the fidelity scorings' threads and limits."""
    record = state.registry.get(experiment_id, caller)
    return await state.fidelity_work.run(
        caller.owner, lambda deadline: _fit(record.run_dir, request.regression, request.questionnaire_id, deadline))


def _fit(run_dir: Path | str, spec: RegressionSpec, questionnaire_id: str | None, deadline: Deadline) -> RegressionFidelity:
    fitted = regression_fidelity(run_dir, spec, questionnaire_id=questionnaire_id, checkpoint=deadline.check)
    return RegressionFidelity(
        formula=fitted.formula, family=fitted.family, n=fitted.n, share_differ=fitted.share_differ,
        share_sign_flipped=fitted.share_sign_flipped,
        coefficients=[RegressionCoefficient(**asdict(c)) for c in fitted.coefficients])
