"""Forks of a real finished run: one without a patch ends like its parent, and its lineage names the
drivers of the rows it starts with."""

from __future__ import annotations

import json
from pathlib import Path

from engine.society.fork.materialize import materialize_fork, plan_fork
from engine.society.fork.run import fork_experiment
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader
from tests.engine.society.crash_support import crash_spec, final_state


def _spec() -> dict:
    return {
        "name": "lineage", "seed": 5, "llm": {"default": {"model": "sim/default"}},
        "agents": [{"id": i, "profile": {"name": f"P{i}"}, "config": {"max_react_turns": 1}} for i in range(3)],
        "environment": {"modules": [{"type": "MessagingSpace"}]},
        "steps": [{"type": "run", "num_steps": 3, "tick": 600}],
    }


def _drivers(run: Path, through_step: int) -> list[str]:
    """The run ids of ``run``'s LLM-call rows up to a tick."""
    with ReplayReader(run) as reader:
        rows = reader.query(f"SELECT DISTINCT run FROM llm_calls WHERE step <= {through_step} ORDER BY run").to_pylist()
    return [row["run"] for row in rows]


def _lineage(run: Path) -> dict:
    return json.loads((run / "SOCIETY.json").read_text(encoding="utf-8"))["fork"]


async def test_fork_lineage_names_the_drivers_of_the_rows_it_starts_with(shell, tmp_path: Path) -> None:
    parent, child = tmp_path / "parent", tmp_path / "child"
    summary = await run_experiment(parse_spec(_spec()), parent, shell)
    assert summary.status == "completed", summary.error
    (founder,) = _drivers(parent, 3)

    _, forked = await fork_experiment(parent, 1, child, shell)
    assert forked.status == "completed", forked.error
    assert _lineage(child)["parent_runs"] == [founder]
    (own,) = set(_drivers(child, 3)) - {founder}  # the fork's driver wrote ticks 2-3 under its own run id

    # A fork of the fork at tick 2 starts with the founder's tick 1 and the child's tick 2.
    point, fork = plan_fork(child, 2)
    materialize_fork(point, fork, tmp_path / "grandchild")
    assert _lineage(tmp_path / "grandchild")["parent_runs"] == sorted([founder, own])
    assert _drivers(tmp_path / "grandchild", 3) == sorted([founder, own])


async def test_fork_without_a_patch_ends_like_its_parent_from_the_response_cache(shell, tmp_path: Path) -> None:
    parent, child = tmp_path / "parent", tmp_path / "child"
    summary = await run_experiment(parse_spec(crash_spec(ticks_before=2, ticks_after=1)), parent, shell)
    assert summary.status == "completed", summary.error

    # Tick 2 comes before the questionnaire: the fork answers it and steps tick 3 from copies of the workspaces
    # as tick 2 left them (the parent's tick 3 has rewritten and appended to them since).
    report, forked = await fork_experiment(parent, 2, child, shell)
    assert forked.status == "completed", forked.error
    assert report.agents == 6 and report.workspace_bytes > 0

    assert final_state(child) == final_state(parent)
    with ReplayReader(child) as reader:
        calls = reader.query("SELECT count(*) AS n, count(*) FILTER (WHERE cached) AS hits FROM llm_calls WHERE step > 2").to_pylist()[0]
    assert calls["n"] > 0 and calls["hits"] == calls["n"]
