"""A run's phase in its progress report: its JSON (old JSON still parses) and how the progress line shows it."""

from __future__ import annotations

import pytest

from engine.run_progress import Phase, RunPhase, RunProgress, describe_phase, render_progress
from engine.run_status import RunStatus


def test_a_phase_round_trips_through_json_and_json_from_before_phases_still_parses() -> None:
    progress = RunProgress(RunStatus.STARTING, 0, 2, 0, 10).with_phase(Phase(RunPhase.CREATING_WORKSPACES, 1200, 5000))
    data = progress.to_json()
    assert (data["phase"], data["phase_done"], data["phase_total"]) == ("creating workspaces", 1200, 5000)
    assert type(data["phase"]) is str and RunProgress.from_json(data) == progress
    older = {"status": "running", "ticks_done": 1, "ticks_total": 2, "agent_steps_done": 5, "agent_steps_total": 10,
             "llm_calls": 7}  # a service from before phases
    parsed = RunProgress.from_json(older)
    assert parsed.phase is parsed.phase_done is parsed.phase_total is parsed.phase_seconds is None
    assert render_progress(parsed) == render_progress(RunProgress(RunStatus.RUNNING, 1, 2, 5, 10, llm_calls=7))
    assert progress.with_phase(None) == RunProgress(RunStatus.STARTING, 0, 2, 0, 10)


@pytest.mark.parametrize(("phase", "shown"), [
    (Phase(RunPhase.STARTING_CLUSTER), "starting cluster"),
    (Phase(RunPhase.LOADING_MODEL, seconds=12.4), "loading model 12 s"),
    (Phase(RunPhase.MODEL_READY, seconds=2.14), "model ready in 2.1 s"),
    (Phase(RunPhase.CREATING_WORKSPACES, 1200, 5000), "creating workspaces 1,200/5,000"),
    (Phase(RunPhase.TICK), "agents stepping"),
    (Phase(RunPhase.QUESTIONNAIRE, 40, 100), "questionnaire 40/100 answers"),
    (Phase(RunPhase.INTERVIEW, 1, 3), "interview 1/3 answers"),
    (Phase("a phase of a newer engine", 3), "a phase of a newer engine 3"),
])
def test_the_progress_line_shows_the_phase_before_the_status(phase: Phase, shown: str) -> None:
    progress = RunProgress(RunStatus.STARTING, 0, 2, 0, 6).with_phase(phase)
    assert describe_phase(progress) == shown
    line = render_progress(progress, width=4)
    assert line.startswith(f"[....] tick 0/2 agent-steps 0/6 llm 0 calls 0 tok ({shown}) starting")
    assert line.split()[-1] == RunStatus.STARTING  # the status stays the last word

