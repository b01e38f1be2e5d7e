"""Forks of a real finished run: the lineage names the drivers of the rows a fork starts with."""

from __future__ import annotations

import json
from pathlib import Path

from engine.society.fork.materialize import materialize_fork, plan_fork
from engine.society.fork.run import fork_experiment
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader


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


async def test_fork_lineage_names_the_drivers_of_the_rows_it_starts_with(dask_client, tmp_path: Path) -> None:
    parent, child = tmp_path / "parent", tmp_path / "child"
    summary = await run_experiment(parse_spec(_spec()), parent, dask_client)
    assert summary.status == "completed", summary.error
    (founder,) = _drivers(parent, 3)

    _, forked = await fork_experiment(parent, 1, child, dask_client)
    assert forked.status == "completed", forked.error
    assert _lineage(child)["parent_runs"] == [founder]
    (own,) = set(_drivers(child, 3)) - {founder}  # the fork's driver wrote ticks 2-3 under its own run id

    # A fork of the fork at tick 2 starts with the founder's tick 1 and the child's tick 2.
    point, fork = plan_fork(child, 2)
    materialize_fork(point, fork, tmp_path / "grandchild")
    assert _lineage(tmp_path / "grandchild")["parent_runs"] == sorted([founder, own])
    assert _drivers(tmp_path / "grandchild", 3) == sorted([founder, own])
