"""Progress from the first second, in process (the in-process shell): a questionnaire reports its answers as they
come. The live LLM-call counts crossing Dask's topic from a worker are in ``tests/engine/society/shells/test_on_dask.py``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.run_progress import RunPhase, RunProgress
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec


def spec(llm: dict[str, Any], steps: list[dict[str, Any]], agents: int = 3) -> Any:
    return parse_spec({
        "name": "live-progress", "seed": 2,
        "population": [{"count": agents, "profile_template": {"name": "P{i}"}, "config": {"max_react_turns": 2}}],
        "environment": {"modules": [{"type": "MessagingSpace"}]},
        "llm": {"default": llm}, "steps": steps,
    })


async def test_a_questionnaire_reports_its_answers_as_they_come(shell, tmp_path: Path) -> None:
    questions = [{"id": "happy", "prompt": "How happy are you?", "response_type": "integer", "min": 1, "max": 7},
                 {"id": "mood", "prompt": "Your mood?", "response_type": "text"}]
    steps = [{"type": "run", "num_steps": 1, "tick": 600},
             {"type": "questionnaire", "questionnaire_id": "wellbeing", "questions": questions}]
    reports: list[RunProgress] = []

    summary = await run_experiment(spec({"model": "sim/default"}, steps, agents=20), tmp_path / "run", shell,
                                   on_progress=reports.append)

    assert summary.status == "completed", summary.error
    asked = [r for r in reports if r.phase == RunPhase.QUESTIONNAIRE]
    assert asked[0].phase_done == 0 and {r.phase_total for r in asked} == {40}  # 20 agents x 2 questions
    assert asked[-1].phase_done == 40
    done = [r.phase_done or 0 for r in asked]
    assert done == sorted(done)
    assert asked[-1].llm_calls >= asked[0].llm_calls + 20  # the answers' calls count too
    first = [r.phase for r in reports if r.phase is not None]
    assert first[:2] == [RunPhase.CREATING_WORKSPACES, RunPhase.CREATING_WORKSPACES]  # in process: no workers to check
    assert RunPhase.COMMITTING in first and first[-1] == RunPhase.FINISHING and reports[-1].phase is None
