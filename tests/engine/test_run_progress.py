"""RunProgress: what the runner reports per tick (LLM usage, errors), its JSON form and its one-line rendering."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.run_progress import RunProgress, render_progress
from engine.run_status import RunStatus
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader


def _spec(ticks: int, budget: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "name": "progress",
        "agents": [{"id": i, "type": "PersonAgent", "profile": {"name": f"p{i}"}} for i in range(3)],
        "environment": {"modules": [{"type": "MessagingSpace"}]},
        "llm": {"default": {"model": "sim/default"}},
        "steps": [{"type": "run", "num_steps": ticks, "tick": 600}],
        **({"budget": budget} if budget else {}),
    }


def _ticks(reports: list[RunProgress]) -> list[RunProgress]:
    """The report of each tick's end: the first one whose tick count moved on."""
    out, last = [], reports[0].ticks_done
    for report in reports[1:]:
        if report.ticks_done > last:
            out.append(report)
            last = report.ticks_done
    return out


async def test_each_ticks_report_counts_the_agents_llm_calls_and_tokens_so_far(shell, tmp_path: Path) -> None:
    reports: list[RunProgress] = []
    summary = await run_experiment(parse_spec(_spec(3)), tmp_path / "run", shell, on_progress=reports.append)
    assert summary.status == "completed", summary.error
    ticks = _ticks(reports)
    assert [t.ticks_done for t in ticks] == [1, 2, 3]
    calls = [t.llm_calls for t in ticks]
    assert calls[0] >= 3 and calls == sorted(calls) and len(set(calls)) == 3
    assert all(t.input_tokens > 0 and t.output_tokens > 0 and t.errors == 0 for t in ticks)
    with ReplayReader(tmp_path / "run") as reader:
        agent_calls = reader.query("SELECT sum(llm_calls) AS n FROM actions").column("n")[0].as_py()
    assert ticks[-1].llm_calls == agent_calls  # the agents' calls; the final tally adds the router's
    assert summary.llm_calls >= ticks[-1].llm_calls


async def test_a_resumed_run_reports_counts_from_where_the_earlier_driver_left_off(shell, tmp_path: Path) -> None:
    run = tmp_path / "run"
    first: list[RunProgress] = []
    stopped = await run_experiment(parse_spec(_spec(4, {"max_calls": 8})), run, shell, on_progress=first.append)
    assert stopped.status == "budget_exhausted"
    committed = stopped.llm_calls
    resumed: list[RunProgress] = []
    done = await run_experiment(parse_spec(_spec(4, {"max_calls": 10_000})), run, shell, on_progress=resumed.append,
                                resume=True)
    assert done.status == "completed", done.error
    assert resumed[0].status == RunStatus.STARTING
    assert resumed[0].llm_calls == committed and resumed[0].ticks_done == stopped.ticks_done
    assert resumed[-1].llm_calls > committed


def test_progress_round_trips_through_json_and_ignores_unknown_fields() -> None:
    progress = RunProgress(RunStatus.RUNNING, 2, 5, 8, 20, llm_calls=9, input_tokens=100, output_tokens=20,
                           cost_usd=0.5, errors=1)
    data = {**progress.to_json(), "added_later": True}
    assert data["status"] == "running" and type(data["status"]) is str
    assert RunProgress.from_json(data) == progress
    with pytest.raises(ValueError):
        RunProgress.from_json({**data, "status": "exploded"})


def test_the_progress_line_shows_ticks_agent_steps_usage_and_errors() -> None:
    line = render_progress(RunProgress(RunStatus.RUNNING, 2, 5, 10, 20, llm_calls=9, input_tokens=100, output_tokens=20,
                                       cost_usd=0.25, errors=1), width=10)
    assert line.startswith("[#####.....] tick 2/5 agent-steps 10/20 llm 9 calls 120 tok $0.2500 errors 1 running")
    quiet = render_progress(RunProgress(RunStatus.STARTING, 0, 5, 0, 0), width=4)
    assert quiet.startswith("[....] tick 0/5 agent-steps 0/0 llm 0 calls 0 tok starting")
