"""The env router's coder calls in a real run: charged to the run's budget and traced like agents' calls.

Agents ask the env over a CodeGen router (the in-process shell's env router); every LLM call goes over HTTP to
the simulated LLM, which counts what it served.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest

from engine.llm.sim import SimLLM
from engine.llm.sim.background import serving
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader


@pytest.fixture
def sim_url():
    with serving(SimLLM(name="router-budget", seed=5)) as url:
        yield url


def served(url: str) -> int:
    return sum(httpx.get(f"{url}/stats").json()["calls"].values())


def codegen_spec(url: str, **changes):
    spec = {
        "name": "router-budget",
        "seed": 11,
        "llm": {"default": {"model": "openai/sim", "base_url": f"{url}/v1"}},
        "population": [{"count": 6, "profile_template": {"name": "P{i}"},
                        "config": {"tools": ["ask_env"], "max_react_turns": 2}}],
        "environment": {"modules": [{"type": "MessagingSpace"}], "router": "codegen"},
        "steps": [{"type": "run", "num_steps": 3, "tick": 600}],
        "batch_size": 3,
    }
    spec.update(changes)
    return parse_spec(spec)


def every_llm_calls_row(run: Path) -> list[dict]:
    """The rows of every ``llm_calls`` file, committed or staged by the stopped transaction."""
    return [row for path in sorted((run / "replay" / "llm_calls").glob("*.parquet*"))
            for row in pq.read_table(path).to_pylist()]


async def test_router_calls_never_take_the_run_past_its_call_budget(shell, tmp_path, sim_url):
    # Unbudgeted, the first tick makes this many calls, the router's among them:
    free = await run_experiment(codegen_spec(sim_url), tmp_path / "free", shell)
    assert free.status == "completed", free.error
    with ReplayReader(tmp_path / "free") as reader:
        tick1 = {r["who"]: r["n"] for r in reader.query(
            "SELECT CASE WHEN caller = 'router' THEN 'router' ELSE 'agents' END AS who, count(*) AS n "
            "FROM llm_calls WHERE step = 1 GROUP BY 1"
        ).to_pylist()}
    assert tick1["router"] >= 2 and tick1["agents"] >= 6, tick1
    # A budget the agents' calls of tick 1 alone would spend: the router's calls come on top of them
    # unless they are charged to the same budget.
    k = tick1["agents"] - 2

    before = served(sim_url)
    run = tmp_path / "run"
    stopped = await run_experiment(codegen_spec(sim_url, budget={"max_calls": k}), run, shell)

    assert stopped.status == "budget_exhausted", stopped.error
    assert served(sim_url) - before <= k + 1  # what the provider saw: the budgeted calls and the preflight's test call
    rows = every_llm_calls_row(run)
    assert any(r["caller"] == "router" for r in rows)
    assert len([r for r in rows if r["status"] == "ok"]) <= k
    assert json.loads((run / "SOCIETY_STEP.json").read_text())["extra"]["usage"]["calls"] <= k


async def test_router_coder_calls_get_llm_completion_spans_like_agent_calls(shell, tmp_path, sim_url):
    run = tmp_path / "run"
    summary = await run_experiment(codegen_spec(sim_url, steps=[{"type": "run", "num_steps": 1, "tick": 600}]), run, shell)
    assert summary.status == "completed", summary.error
    with ReplayReader(run) as reader:
        calls = {r["who"]: r["n"] for r in reader.query(
            "SELECT CASE WHEN caller = 'router' THEN 'router' ELSE 'agent' END AS who, count(*) AS n FROM llm_calls GROUP BY 1"
        ).to_pylist()}
        # each completion span's parent: env.ask (or, once per run, env.world_description) for the
        # router's calls, agent.step's subtree for the agents'
        spans = {r["parent"]: r["n"] for r in reader.query(
            "SELECT CASE WHEN p.name IN ('env.ask', 'env.world_description') THEN 'router' ELSE 'agent' END AS parent, "
            "count(*) AS n "
            "FROM spans s JOIN spans p ON s.parent_id = p.span_id WHERE s.name = 'llm.completion' GROUP BY 1"
        ).to_pylist()}
        coder_spans = reader.query(
            "SELECT s.trace_id = p.trace_id AS same_trace, json_extract_string(s.attrs, '$.prompt') AS prompt "
            "FROM spans s JOIN spans p ON s.parent_id = p.span_id "
            "WHERE s.name = 'llm.completion' AND p.name IN ('env.ask', 'env.world_description')"
        ).to_pylist()
    assert calls["router"] >= 1 and calls["agent"] >= 1, calls
    assert spans == calls
    assert all(s["same_trace"] and s["prompt"] for s in coder_spans)
