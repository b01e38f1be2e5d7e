"""``POST /experiments/{id}/steps``: questionnaire, ask or intervene steps on a stored run."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from engine.api import ExperimentSpec, StepSpec, count_llm_callers, read_society_step
from service.admission.auth import Caller
from service.admission.quotas import check_added_steps, least_llm_calls
from service.errors import ExperimentBusyError, SpecRejectedError
from service.openapi import error_example
from service.registry import ACTIVE_STATUSES, Idempotency
from service.schemas import ExperimentAccepted
from service.state import State
from service.submission import check_as_of_kept, extend_spec

__all__ = ["StepsRequest", "router"]

router = APIRouter(prefix="/experiments", tags=["experiments"])


class StepsRequest(BaseModel):
    """Steps to append to a stored run: the spec's own step models (``run`` steps are refused)."""

    model_config = ConfigDict(extra="forbid")

    steps: list[StepSpec] = Field(
        min_length=1,
        examples=[[{"type": "questionnaire", "questionnaire_id": "q2",
                    "questions": [{"id": "trust", "prompt": "Trust in neighbours (0-10)?", "response_type": "integer"}]}]],
    )


@router.post(
    "/{experiment_id}/steps",
    status_code=202,
    response_model=ExperimentAccepted,
    responses={
        404: {"description": "no such experiment (or another owner's)", **error_example("experiment 'abc' not found")},
        409: {"description": "the experiment is queued or running, or an as_of_step names a tick it no longer keeps",
              **error_example("cannot add steps to experiment 'abc': it is running; cancel it first")},
        422: {"description": "invalid steps, a run step, a sweep, a run that never started, or more steps or LLM calls "
                             "than the owner's quota (max_added_steps, max_llm_calls_per_day)",
              **error_example([{"type": "spec_error", "loc": ["body", "steps", 0, "type"], "msg": "steps.0.type: ..."}])},
        429: {"description": "the owner's LLM calls left today are fewer than the steps need (Retry-After: until 00:00 UTC)",
              **error_example("owner 'lab-a' made 999990 LLM calls today (UTC) and has 10 left; ...")},
    },
)
async def add_steps(
    experiment_id: str, body: StepsRequest, state: State, caller: Caller, request: Request, response: Response,
    idempotency_key: Annotated[str | None, Header(alias="Idempotency-Key", min_length=1, max_length=255)] = None,
) -> ExperimentAccepted:
    """Run questionnaire, ask or intervene steps on a stored run, each as a transaction.

    Their answers land in the run's own datasets (``questionnaire_answers``, ``society_queries``);
    rows already there are not changed. The experiment's spec becomes the extended one, and it is
    queued again (202); it ends as the run's verdict says (``completed`` for a clean run). A
    ``run`` step is refused with 422 (``steps.<i>.type``), as is a sweep (not supported yet), an
    ``as_of_step`` after the run's ticks (``steps.<i>.as_of_step``) and an experiment whose run never
    started. 409 while the experiment is queued or running, or when an ``as_of_step`` names a tick the
    run no longer keeps (``snapshots.keep``).

    One request adds at most ``max_added_steps`` steps, and the owner's LLM calls left today must cover the
    fewest the steps make (one per answering agent and question, one per ask or intervene).
    With an ``Idempotency-Key`` (unique per experiment), a retry of the same body adds nothing again and
    answers as the first did (``Idempotent-Replayed: true``); the same key with other steps is a 409.
    """
    record = state.registry.get(experiment_id, caller)
    idempotency = None
    if idempotency_key is not None:
        idempotency = Idempotency(key=idempotency_key, body_sha256=hashlib.sha256(await request.body()).hexdigest())
        if state.registry.steps_added(record.id, idempotency):
            response.headers["Idempotent-Replayed"] = "true"
            return record.accepted(state.experiment_dashboard_link)
    if record.status in ACTIVE_STATUSES:
        raise ExperimentBusyError(record.id, record.status, "add steps to")
    quota = state.intake.quotas.for_owner(record.owner)
    check_added_steps(len(body.steps), quota, record.owner)
    # Off the event loop: a million-member spec takes seconds to build and deal (every other request would wait).
    spec, callers = await state.intake.work.run(record.owner, lambda deadline: _extended(state.registry.spec(record.id), body.steps))
    state.check_llm_calls(record.owner, "the added steps", wanted=least_llm_calls(body.steps, *callers))
    status = read_society_step(record.run_dir)
    if status is None:
        raise SpecRejectedError("the experiment's run never started, so there is no stored run to add steps to; resubmit it")
    check_as_of_kept(spec, record.run_dir, status)  # an as_of_step on a tick the run no longer keeps: 409
    record, added = state.registry.add_steps(record.id, spec, idempotency)
    if not added:  # a concurrent retry with the same key added them
        response.headers["Idempotent-Replayed"] = "true"
        return record.accepted(state.experiment_dashboard_link)
    # The submitter marks it queued and publishes that event before this answers, so a client that
    # opens the event stream next never takes the earlier run's final event for this one's.
    queued = await state.engine.call(state.submitter.submit, record, spec, resume=True, force=True)
    return queued.accepted(state.experiment_dashboard_link)


def _extended(stored: Mapping[str, Any], steps: Sequence[StepSpec]) -> tuple[ExperimentSpec, tuple[int, int]]:
    """The stored spec with ``steps`` added, and its LLM agents and archetype groups (:func:`count_llm_callers`)."""
    spec = extend_spec(ExperimentSpec.model_validate(stored), steps)
    return spec, count_llm_callers(spec)
