"""``POST /experiments/{id}/fork``: a new experiment that starts from a finished one's committed tick."""

from __future__ import annotations

import asyncio
from typing import Any

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field

from engine.api import ExperimentSpec, has_society_step
from engine.errors import SpecError
from service.admission.auth import Caller
from service.errors import ExperimentBusyError, SpecRejectedError
from service.openapi import error_example
from service.registry import ACTIVE_STATUSES, ExperimentRecord
from service.schemas import ExperimentAccepted, ForkedFrom
from service.state import ServiceState, State
from service.submission import check_fork

__all__ = ["ForkRequest", "router"]

router = APIRouter(prefix="/experiments", tags=["experiments"])

_INTERVENE_AT_2 = {"steps": [{"type": "run", "num_steps": 2, "tick": 3600},
                             {"type": "intervene", "instruction": "A storm warning is issued for tonight."},
                             {"type": "run", "num_steps": 2, "tick": 3600}]}


class ForkRequest(BaseModel):
    """``POST /experiments/{id}/fork``'s body: where the fork starts, and what it changes about the future."""

    model_config = ConfigDict(extra="forbid")

    #: The parent's committed tick the fork starts from (0: before its first).
    at_step: int = Field(ge=0, examples=[2])
    #: A JSON merge patch (RFC 7386) over the parent's spec: mappings merge, lists and values replace, null
    #: removes. It may change what comes after ``at_step`` (steps, env module kwargs, LLM settings, budget),
    #: not the agents, env module types, router, start time or the steps up to ``at_step``. Null: the same spec.
    patch: dict[str, Any] | None = Field(None, examples=[_INTERVENE_AT_2])
    #: The new experiment's name (default: the patch's, else the parent's with ``(fork at K)``).
    name: str | None = Field(None, min_length=1, max_length=200)


@router.post(
    "/{experiment_id}/fork",
    status_code=201,
    response_model=ExperimentAccepted,
    responses={
        404: {"description": "no such experiment (or another owner's)", **error_example("experiment 'abc' not found")},
        409: {"description": "the parent is queued or running",
              **error_example("cannot fork experiment 'abc': it is running; cancel it first")},
        422: {"description": "at_step past the parent's ticks or not kept (snapshots.keep), a patch that makes no valid fork "
                             "(loc: body, patch, its field path), over a quota or not granted, a sweep, or a run that never started",
              **error_example([{"type": "spec_error", "loc": ["body", "patch", "population"],
                           "msg": "population: a fork keeps the parent's agents (their workspaces carry on); ..."}])},
    },
)
async def fork_experiment(
    experiment_id: str, body: ForkRequest, state: State, caller: Caller, response: Response
) -> ExperimentAccepted:
    """Start a new experiment from a finished one's state at its committed tick ``at_step``.

    The fork is a new experiment of the caller's (its own id and run directory, the same quotas and
    grants as a submission); its spec is the parent's with ``patch`` applied, checked before anything
    is registered. When it gets a slot, its run directory is made from the parent's as of that tick
    (workspaces, env snapshot, the datasets' rows so far and the response cache, so the shared past
    costs no provider call) and its remaining steps run. ``forked_from`` names the parent and tick.
    The parent is not changed. 409 while the parent is queued or running.
    """
    parent = state.registry.get(experiment_id, caller)
    state.check_llm_calls(caller.owner, "a fork")
    if parent.status in ACTIVE_STATUSES:
        raise ExperimentBusyError(parent.id, parent.status, "fork")
    if (await asyncio.to_thread(state.registry.shown_spec, parent.id)).get("sweep") is not None:
        raise SpecRejectedError("a sweep cannot be forked (not supported yet); submit one of its cells as a run and fork that")
    if not has_society_step(parent.run_dir):
        raise SpecRejectedError("the experiment's run never started, so it has no tick to fork from")
    # Off the event loop: planning reads the parent's history and workspaces' journals.
    spec = await state.intake.work.run(caller.owner, lambda deadline: _admit(state, parent, body, caller.owner))
    record = state.registry.create(spec, owner=caller.owner, forked_from=ForkedFrom(experiment=parent.id, at_step=body.at_step))
    queued = await state.engine.call(state.submitter.submit, record, spec, resume=True)
    response.headers["Location"] = f"/experiments/{record.id}"
    return queued.accepted(state.experiment_dashboard_link)


def _admit(state: ServiceState, parent: ExperimentRecord, body: ForkRequest, owner: str) -> ExperimentSpec:
    """The fork's spec, checked as a fork of the parent's run and against the owner's quotas and grants."""
    patch = {"name": f"{parent.name[:180]} (fork at {body.at_step})", **(body.patch or {})}
    if body.name is not None:
        patch["name"] = body.name
    try:
        spec = check_fork(parent.run_dir, body.at_step, patch)
        state.intake.authorize(spec, owner, state.disk.used)
    except (SpecError, SpecRejectedError) as error:
        # A spec field of the fork is set through the patch: that is where the request names it.
        if error.path and error.path != "at_step":
            error.path = f"patch.{error.path}"
        raise
    return spec
