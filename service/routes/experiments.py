"""``/experiments``: submit a spec, list and watch experiments, cancel, resume or delete one."""

from __future__ import annotations

import asyncio
import hashlib
from typing import Annotated

from fastapi import APIRouter, Header, Request, Response

from service.admission.auth import Caller
from service.admission.intake import spec_request_body
from service.registry import ExperimentRecord, Idempotency
from service.schemas import ExperimentAccepted, ExperimentDetail, ExperimentList, ResumeRequest
from service.state import ServiceState, State

__all__ = ["router"]

router = APIRouter(prefix="/experiments", tags=["experiments"])


@router.post(
    "",
    status_code=201,
    response_model=ExperimentAccepted,
    openapi_extra={"requestBody": spec_request_body()},
    responses={
        409: {"description": "The Idempotency-Key was used with another body"},
        413: {"description": "The body is over POLIS_MAX_BODY_BYTES"},
        415: {"description": "The body is neither JSON nor YAML"},
        422: {"description": "An invalid spec, or one over a quota or naming a credential not granted; "
              "each detail item's loc names the field"},
    },
)
async def submit_experiment(
    request: Request, state: State, caller: Caller, response: Response,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", min_length=1, max_length=255)] = None,
) -> ExperimentAccepted:
    """Validate an experiment spec (JSON or YAML), register it and start running it.

    The answer is the experiment's id, state and links, not its spec (``GET /experiments/{id}`` has it).
    The spec must fit the caller's quotas (agents, agent-steps, sweep cells, disk, LLM calls today) and name only the
    credentials and endpoints the server grants the caller. A refused spec is answered with 422;
    each ``detail`` item's ``loc`` names the field path, e.g. ``["body", "agents", 0, "id"]``.

    With an ``Idempotency-Key`` (any string of up to 255 characters, unique per caller), a retry of the same
    body returns the experiment the first request made (``Idempotent-Replayed: true``), however often it is
    sent and across restarts; the same key with another body is a 409.
    """
    state.check_llm_calls(caller.owner, "a new experiment")
    idempotency = None
    if idempotency_key is not None:
        idempotency = Idempotency(key=idempotency_key, body_sha256=hashlib.sha256(await request.body()).hexdigest())
        if (earlier := state.registry.submitted(caller.owner, idempotency)) is not None:
            return _submitted(earlier, state, response, replayed=True)
    spec = await state.intake.read(request, caller.owner, state.disk.used)
    # Off the event loop: the record's write waits for the disk (fsync).
    if idempotency is None:
        record, created = await asyncio.to_thread(state.registry.create, spec, caller.owner), True
    else:  # a concurrent request with the same key may have made it meanwhile
        record, created = await asyncio.to_thread(state.registry.create_once, spec, caller.owner, idempotency)
    if created:
        await state.engine.call(state.submitter.submit, record, spec)
    return _submitted(record, state, response, replayed=not created)


def _submitted(record: ExperimentRecord, state: ServiceState, response: Response, *, replayed: bool) -> ExperimentAccepted:
    response.headers["Location"] = f"/experiments/{record.id}"
    if replayed:
        response.headers["Idempotent-Replayed"] = "true"
    return record.accepted(state.experiment_dashboard_link)


@router.get("", response_model=ExperimentList)
async def list_experiments(state: State, caller: Caller) -> ExperimentList:
    """List the caller's experiments (an admin's: everyone's), newest first."""
    return ExperimentList(experiments=[r.brief() for r in state.registry.records(caller)])


@router.get("/{experiment_id}", response_model=ExperimentDetail)
async def get_experiment(experiment_id: str, state: State, caller: Caller) -> ExperimentDetail:
    """One experiment: status, progress, error, spec, and the Dask dashboard to watch it on."""
    record = state.registry.get(experiment_id, caller)
    spec = await asyncio.to_thread(state.registry.shown_spec, record.id)
    return record.detail(state.intake.shown(spec), state.experiment_dashboard_link)


@router.post("/{experiment_id}/cancel", status_code=202, response_model=ExperimentAccepted)
async def cancel_experiment(experiment_id: str, state: State, caller: Caller) -> ExperimentAccepted:
    """Ask a queued or running experiment to stop; it ends ``cancelled``. 409 if it has finished."""
    state.registry.get(experiment_id, caller)
    await state.engine.call(state.submitter.cancel, experiment_id)
    return state.registry.get(experiment_id, caller).accepted(state.experiment_dashboard_link)


@router.post("/{experiment_id}/resume", status_code=202, response_model=ExperimentAccepted)
async def resume_experiment(
    experiment_id: str, state: State, caller: Caller, body: ResumeRequest | None = None
) -> ExperimentAccepted:
    """Queue a finished experiment again; it continues from its last committed transaction.

    The optional ``budget`` replaces the spec's (raise it to continue a ``budget_exhausted`` run); ``batch_size`` and
    ``max_workers`` change how the rest runs (say, for a larger cluster), not what it simulates.
    409 while the experiment is queued or running.
    """
    state.registry.get(experiment_id, caller)
    state.check_llm_calls(caller.owner, "resuming an experiment")
    body = body or ResumeRequest()
    record = await state.engine.call(state.submitter.resume, experiment_id, caller, body.budget, body.run_options())
    return record.accepted(state.experiment_dashboard_link)


@router.delete("/{experiment_id}", status_code=204, response_class=Response)
async def delete_experiment(experiment_id: str, state: State, caller: Caller) -> Response:
    """Remove a finished experiment: its record and its run directory (its disk use stops counting).

    409 while the experiment is queued or running: cancel it first.
    """
    state.registry.get(experiment_id, caller)
    await asyncio.to_thread(state.registry.delete, experiment_id, caller)
    state.submitter.events.forget(experiment_id)
    state.disk.forget(experiment_id)
    return Response(status_code=204)
