"""The demo spec through the engine (in-process shell), read back with real DuckDB."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.society.run.runner import run_experiment
from engine.society.workspaces.manifest import agent_workspace
from engine.spec import load_spec
from engine.storage.reader import ReplayReader

DEMO = Path(__file__).resolve().parents[3] / "examples" / "demo.yaml"


@pytest.fixture(scope="module")
def demo_spec():
    return load_spec(DEMO)


async def test_demo_yields_one_action_row_per_agent_per_tick(demo_spec, shell, tmp_path):
    progress = []
    summary = await run_experiment(demo_spec, tmp_path / "run", shell, on_progress=progress.append)

    assert summary.status == "completed", summary.error
    assert summary.ticks_done == 3 and summary.agent_steps == 60
    assert progress[-1].status == "completed" and progress[-1].agent_steps_done == 60
    # the last progress line and the summary count the same calls: the router's coder calls and the world's too
    last = progress[-1]
    assert (last.llm_calls, last.input_tokens, last.output_tokens) == (summary.llm_calls, summary.input_tokens,
                                                                        summary.output_tokens)
    with ReplayReader(tmp_path / "run") as reader:
        assert reader.count("actions") == 60
        assert reader.count("llm_calls") == summary.llm_calls > reader.query(
            "SELECT sum(llm_calls) AS n FROM actions").column("n")[0].as_py()  # more than the agents' own
        per_agent_tick = reader.query("SELECT agent_id, step, count(*) AS n FROM actions GROUP BY ALL").to_pylist()
        assert len(per_agent_tick) == 20 * 3
        assert {row["n"] for row in per_agent_tick} == {1}
        assert sorted({row["step"] for row in per_agent_tick}) == [1, 2, 3]
        env_steps = reader.query("SELECT step FROM env_messaging ORDER BY step").column("step").to_pylist()
        assert env_steps == [1, 2, 3]
        # Every agent-step made at least one LLM call and one env call (its inbox observation).
        assert reader.query("SELECT min(llm_calls) m FROM actions").column("m")[0].as_py() >= 1
        assert reader.query("SELECT min(env_calls) m FROM actions").column("m")[0].as_py() >= 1
        spans = {r["name"] for r in reader.query("SELECT DISTINCT name FROM spans").to_pylist()}
        assert {"agent.step", "llm.completion", "env.ask"} <= spans
    run = tmp_path / "run"
    assert (run / "SOCIETY.json").exists() and (run / "SOCIETY_STEP.json").exists()
    assert agent_workspace(run, 0).is_file("AGENT.json")  # type: ignore[union-attr]  # in a pack (the default)
    status = json.loads((run / "SOCIETY_STEP.json").read_text())
    assert status["txn"] == 3 and status["env_snapshot"] == "txn_000003"
    assert (run / "env" / "_snapshots" / "txn_000003" / "MessagingSpace" / "state" / "ENV_STATE.json").exists()
    # every tick stays forkable by default (snapshots.keep: null): one env snapshot per tick, one history record per transaction
    assert sorted(p.name for p in (run / "env" / "_snapshots").iterdir()) == ["txn_000001", "txn_000002", "txn_000003"]
    assert sorted(p.name for p in (run / "history").iterdir()) == ["txn_000001.json", "txn_000002.json", "txn_000003.json"]
    assert not list(run.rglob("*.staged-*"))
    # and the workspace manifest of each tick, and of the agents as created, names their packs
    assert sorted(p.name for p in (run / "workspaces").iterdir()) == [f"txn_00000{i}.json" for i in range(4)]
    assert status["workspaces"] == "workspaces/txn_000003.json"


async def test_same_seed_gives_identical_replay_whatever_the_batching(demo_spec, shell, tmp_path):
    wall_clock = {"duration_ms", "llm_latency_ms"}
    tables = []
    for i, batch_size in enumerate((256, 3)):
        spec = demo_spec.model_copy(update={"batch_size": batch_size})
        summary = await run_experiment(spec, tmp_path / f"run{i}", shell)
        assert summary.status == "completed", summary.error
        with ReplayReader(tmp_path / f"run{i}") as reader:
            actions = reader.query("SELECT * EXCLUDE (run, duration_ms, llm_latency_ms) FROM actions ORDER BY step, agent_id")
            messages = reader.query("SELECT * EXCLUDE (run) FROM messages ORDER BY step, sender, content")
            tables.append((actions.to_pylist(), messages.to_pylist()))
    assert wall_clock.isdisjoint(tables[0][0][0])
    assert tables[0] == tables[1]


def test_the_demo_script_ends_with_a_results_page_whose_plots_show_a_society_acting(tmp_path):
    import os
    import subprocess
    import sys

    from engine.results.report import load_report

    script = Path(__file__).resolve().parents[3] / "examples" / "demo.py"
    env = {**os.environ, "POLIS_SCHEDULER": "in-process"}
    done = subprocess.run([sys.executable, str(script), "--model", "sim", str(tmp_path / "runs" / "demo")], cwd=tmp_path,
                          capture_output=True, text=True, timeout=170, env=env)
    assert done.returncode == 0, done.stderr
    page = tmp_path / "runs" / "karate.html"
    assert f"the club's results page: {page}" in done.stdout and page.stat().st_size > 0
    panels = {panel.key: panel for panel in load_report(tmp_path / "runs" / "karate").panels}
    for key in ("network.cascades", "network.degrees", "network.ei_index"):
        assert any(any(y for y in line.y) for line in panels[key].lines), key  # a plot with something on it
    # run again: each run replaces its own folder (overwrite), never another folder
    again = subprocess.run([sys.executable, str(script), "--model", "sim", str(tmp_path / "runs" / "demo")], cwd=tmp_path,
                           capture_output=True, text=True, timeout=170, env=env)
    assert again.returncode == 0, again.stderr
