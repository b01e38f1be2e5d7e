"""A fork's datasets show its lineage: rows it inherited name the parent's drivers in ``run``, rows it wrote its own."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from engine.errors import StorageError
from engine.society.fork.materialize import materialize_fork, plan_fork
from engine.society.fork.run import fork_experiment
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.atomic import atomic_write_json, read_json
from engine.storage.reader import ReplayReader
from tests.engine.society.crash_support import crash_spec

AT = 2
TICKS = 4


def _spec() -> dict:
    spec = crash_spec(ticks_before=1, ticks_after=TICKS - 1)  # tick 1, a questionnaire (step 1), ticks 2-4
    spec["steps"].append({"type": "ask", "question": "How many agents are there?"})  # step 4: the fork's own
    return spec


def _runs_by_side(reader: ReplayReader, name: str) -> dict[str, set[str | None]]:
    rows = reader.query(f"SELECT DISTINCT step <= {AT} AS inherited, run FROM {name}").to_pylist()
    return {side: {r["run"] for r in rows if r["inherited"] == (side == "inherited")} for side in ("inherited", "own")}


async def test_a_fork_keeps_the_parents_run_ids_up_to_its_tick_and_writes_its_own_after(shell, tmp_path: Path) -> None:
    parent, fork = tmp_path / "parent", tmp_path / "fork"
    summary = await run_experiment(parse_spec(_spec()), parent, shell)
    assert summary.status == "completed", summary.error
    with ReplayReader(parent) as reader:
        [parent_run] = [r["run"] for r in reader.query("SELECT DISTINCT run FROM llm_calls").to_pylist()]

    report, forked = await fork_experiment(parent, AT, fork, shell)
    assert forked.status == "completed", forked.error

    with ReplayReader(fork) as reader:
        names = reader.datasets()
        [fork_run] = [r["run"] for r in reader.query(f"SELECT DISTINCT run FROM llm_calls WHERE step > {AT}").to_pylist()]
        # agent_profiles is the run's start (no step): a fork writes its own
        sides = {name: _runs_by_side(reader, name) for name in names if "step" in reader.query(f"SELECT * FROM {name} LIMIT 0").column_names}
        profiles = {r["run"] for r in reader.query("SELECT DISTINCT run FROM agent_profiles").to_pylist()}
    assert fork_run != parent_run and profiles == {fork_run}
    assert read_json(fork / "SOCIETY.json")["fork"]["parent_runs"] == [parent_run]
    assert {"actions", "llm_calls", "transcripts", "agent_memory", "questionnaire_answers", "society_queries",
            "env_tool_calls", "env_metrics", "codegen_cache", "env_messaging", "messages"} <= set(names)
    for name, side in sides.items():
        assert side["inherited"] <= {parent_run} and side["own"] <= {fork_run}, f"{name}: {side}"
    with_rows = {name for name, side in sides.items() if side["inherited"]} & {name for name, side in sides.items() if side["own"]}
    assert with_rows >= {"actions", "llm_calls", "agent_memory", "env_tool_calls", "env_metrics", "codegen_cache",
                         "env_messaging"}, sides  # both sides hold rows, so the split above compares something
    assert sides["questionnaire_answers"] == {"inherited": {parent_run}, "own": set()}  # asked after tick 1
    assert sides["society_queries"] == {"inherited": set(), "own": {fork_run}}  # asked after tick 4


async def test_a_parent_whose_replay_cannot_be_read_is_an_error_before_the_fork_writes_anything(shell, tmp_path: Path) -> None:
    parent = tmp_path / "parent"
    spec = crash_spec(ticks_before=1, ticks_after=1)
    summary = await run_experiment(parse_spec(spec), parent, shell)
    assert summary.status == "completed", summary.error
    point, fork = plan_fork(parent, 1)
    shard = sorted((parent / "replay" / "actions").glob("*.parquet"))[-1]
    shard.write_bytes(b"not parquet")  # a damaged shard, not a missing dataset: the parent's run ids are unknown
    with pytest.raises(StorageError):
        materialize_fork(point, fork, tmp_path / "fork")
    assert not (tmp_path / "fork").exists() or not any((tmp_path / "fork").iterdir())
    shutil.rmtree(parent / "replay" / "actions")  # no actions at all: nothing to name, and no error
    catalog = read_json(parent / "replay" / "_schema.json")
    del catalog["datasets"]["actions"]
    atomic_write_json(parent / "replay" / "_schema.json", catalog)
    assert materialize_fork(point, fork, tmp_path / "fork").agents == 6
    assert read_json(tmp_path / "fork" / "SOCIETY.json")["fork"]["parent_runs"] == []
