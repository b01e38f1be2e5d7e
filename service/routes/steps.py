"""``POST /experiments/{id}/steps``: questionnaire, ask or intervene steps on a stored run."""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from engine.society.status import read_society_step
from engine.spec import ExperimentSpec, StepSpec
from service.auth import Caller
from service.errors import ExperimentBusyError, SpecRejectedError
from service.openapi import error_example
from service.registry import ACTIVE_STATUSES
from service.schemas import ExperimentDetail
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
    response_model=ExperimentDetail,
    responses={
        404: {"description": "no such experiment (or another owner's)", **error_example("experiment 'abc' not found")},
        409: {"description": "the experiment is queued or running, or an as_of_step names a tick it no longer keeps",
              **error_example("cannot add steps to experiment 'abc': it is running; cancel it first")},
        422: {"description": "invalid steps, a run step, a sweep, or a run that never started",
              **error_example([{"type": "spec_error", "loc": ["body", "steps", 0, "type"], "msg": "steps.0.type: ..."}])},
    },
)
async def add_steps(experiment_id: str, body: StepsRequest, state: State, caller: Caller) -> ExperimentDetail:
    """Run questionnaire, ask or intervene steps on a stored run, each as a transaction.

    Their answers land in the run's own datasets (``questionnaire_answers``, ``society_queries``);
    rows already there are not changed. The experiment's spec becomes the extended one, and it is
    queued again (202); it ends as the run's verdict says (``completed`` for a clean run). A
    ``run`` step is refused with 422 (``steps.<i>.type``), as is a sweep (not supported yet), an
    ``as_of_step`` after the run's ticks (``steps.<i>.as_of_step``) and an experiment whose run never
    started. 409 while the experiment is queued or running, or when an ``as_of_step`` names a tick the
    run no longer keeps (``snapshots.keep``).
    """
    record = state.registry.get(experiment_id, caller)
    if record.status in ACTIVE_STATUSES:
        raise ExperimentBusyError(record.id, record.status, "add steps to")
    spec = extend_spec(ExperimentSpec.model_validate(record.spec), body.steps)
    status = read_society_step(record.run_dir)
    if status is None:
        raise SpecRejectedError("the experiment's run never started, so there is no stored run to add steps to; resubmit it")
    check_as_of_kept(spec, record.run_dir, status)  # an as_of_step on a tick the run no longer keeps: 409
    record = state.registry.update(record.id, spec=spec.model_dump(mode="json"))
    # The submitter marks it queued and publishes that event before this answers, so a client that
    # opens the event stream next never takes the earlier run's final event for this one's.
    queued = await state.engine.call(state.submitter.submit, record, spec, resume=True, force=True)
    return ExperimentDetail.from_record(queued, state.experiment_dashboard_link)
