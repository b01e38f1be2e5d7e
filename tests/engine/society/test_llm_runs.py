"""Run-level LLM behaviour in process (the in-process shell): secrets, cache replays, budgets and resumes."""

from __future__ import annotations

import json

import httpx
import pytest

from engine.llm.sim import SimLLM
from engine.llm.sim.background import serving
from engine.society.run.runner import run_experiment
from engine.society.workspaces.manifest import agent_workspace
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader

SECRET = "sk-do-not-leak-4f1c9e"


def small_spec(**changes):
    spec = {
        "name": "llm-runs",
        "seed": 3,
        "population": [{"count": 8, "profile_template": {"name": "P{i}"}, "config": {"max_react_turns": 2}}],
        "environment": {"modules": [{"type": "MessagingSpace"}], "max_router_steps": 1},
        "steps": [{"type": "run", "num_steps": 2, "tick": 600}],
        "batch_size": 3,
    }
    spec.update(changes)
    return parse_spec(spec)


@pytest.fixture(scope="module")
def sim_url():
    with serving(SimLLM(name="http", seed=1)) as url:
        yield url


def http_llm(url):
    return {"default": {"model": "openai/sim", "base_url": f"{url}/v1", "api_key_env": "POLIS_TEST_SECRET"}}


def sim_calls(url) -> int:
    return sum(httpx.get(f"{url}/stats").json()["calls"].values())


async def test_a_secret_named_by_env_var_never_reaches_the_run_dir(shell, tmp_path, sim_url, monkeypatch):
    monkeypatch.setenv("POLIS_TEST_SECRET", SECRET)  # the batches run in this process, and read it here
    summary = await run_experiment(small_spec(llm=http_llm(sim_url)), tmp_path / "run", shell)
    assert summary.status == "completed", summary.error
    assert summary.provider_calls > 0
    files = [p for p in (tmp_path / "run").rglob("*") if p.is_file()]
    assert len(files) > 20
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path
    # Parquet pages may be compressed: read the transcripts' text itself, every call of the run.
    with ReplayReader(tmp_path / "run") as reader:
        rows = reader.query("SELECT messages, reply, error, text_dropped FROM transcripts").to_pylist()
        assert len(rows) == reader.count("llm_calls") > 0
    assert not any(r["text_dropped"] for r in rows) and all(r["messages"] for r in rows)
    assert not [r for r in rows if any(SECRET in (r[k] or "") for k in ("messages", "reply", "error"))]


async def test_rerun_from_the_cache_makes_no_call_and_repeats_the_actions(shell, tmp_path, sim_url, monkeypatch):
    monkeypatch.setenv("POLIS_TEST_SECRET", SECRET)
    spec = small_spec(llm=http_llm(sim_url))
    cache = tmp_path / "cache"
    first = await run_experiment(spec, tmp_path / "a", shell, llm_cache_dir=cache)
    calls_after_first = sim_calls(sim_url)
    # The rerun needs no provider at all: without its preflight test call it makes none.
    second = await run_experiment(spec.model_copy(update={"llm_check": False}), tmp_path / "b", shell, llm_cache_dir=cache)

    assert first.status == second.status == "completed"
    assert first.provider_calls > 0
    assert second.provider_calls == 0
    assert sim_calls(sim_url) == calls_after_first
    query = "SELECT * EXCLUDE (run, duration_ms, llm_latency_ms) FROM actions ORDER BY step, agent_id"
    with ReplayReader(tmp_path / "a") as a, ReplayReader(tmp_path / "b") as b:
        assert a.query(query).to_pylist() == b.query(query).to_pylist()
        assert b.query("SELECT bool_and(cached) AS all_cached FROM llm_calls").column(0)[0].as_py() is True


async def test_budget_stops_within_one_batch_then_resumes_after_raising_it(shell, tmp_path):
    # One decision per agent-step and no env asks: exactly one provider call per agent-step.
    population = [{"count": 8, "profile_template": {"name": "P{i}"}, "config": {"max_react_turns": 1, "tools": ["finish"]}}]
    k = 11
    spec = small_spec(population=population, budget={"max_calls": k})
    run = tmp_path / "run"
    stopped = await run_experiment(spec, run, shell)

    assert stopped.status == "budget_exhausted"
    assert k - 3 <= stopped.provider_calls <= k  # batch size 3: within one batch of K
    # The stopped tick is not committed: readers see tick 1 only; its agents' rows wait staged.
    with ReplayReader(run) as reader:
        assert reader.count("actions") == 8
        assert reader.query("SELECT max(step) AS s FROM actions").column("s")[0].as_py() == 1
    assert list(run.glob("replay/actions/*.staged-*"))

    resumed = await run_experiment(small_spec(population=population, budget={"max_calls": 100}), run, shell, resume=True)
    assert resumed.status == "completed", resumed.error
    with ReplayReader(run) as reader:
        rows = reader.query("SELECT agent_id, step, count(*) AS n FROM actions GROUP BY ALL").to_pylist()
    assert len(rows) == 8 * 2 and {r["n"] for r in rows} == {1}
    # The re-run of the stopped tick replays the agents that had finished it from the response
    # cache: the provider saw exactly one call per agent-step over the whole run, plus the world
    # description (asked once, in the first session; the resumed one read the run's file).
    assert resumed.provider_calls == 16 + 1
    assert not list(run.rglob("*.staged-*"))


async def test_a_run_resumes_with_another_batch_size_and_worker_count_and_steps_each_agent_once(shell, tmp_path):
    population = [{"count": 10, "profile_template": {"name": "P{i}"}, "config": {"max_react_turns": 1, "tools": ["finish"]}}]
    steps = [{"type": "run", "num_steps": 3, "tick": 600}]
    run = tmp_path / "run"
    first = small_spec(population=population, steps=steps, batch_size=3, budget={"max_calls": 15})
    stopped = await run_experiment(first, run, shell)
    assert stopped.status == "budget_exhausted"  # mid tick 2: some of its batches done, the others not

    # The stopped tick re-runs in batches of 4 on one worker slot, then tick 3 too.
    regrouped = small_spec(population=population, steps=steps, batch_size=4, max_workers=1, budget={"max_calls": 100})
    assert small_spec(population=population, steps=steps, batch_size=4, max_workers=1).spec_hash() == \
        small_spec(population=population, steps=steps).spec_hash() != small_spec(population=population, steps=steps, seed=4).spec_hash()
    resumed = await run_experiment(regrouped, run, shell, resume=True)
    assert resumed.status == "completed", resumed.error
    with ReplayReader(run) as reader:
        rows = reader.query("SELECT agent_id, step, count(*) AS n FROM actions GROUP BY ALL").to_pylist()
    assert len(rows) == 10 * 3 and {r["n"] for r in rows} == {1}
    for agent in range(10):  # each workspace counted each tick once, whatever batch it was in
        assert agent_steps(run, agent) == 3
    assert resumed.provider_calls == 30 + 1  # one call per agent-step (the stopped tick's finished ones from the cache)
    stored = json.loads((run / "SOCIETY.json").read_text())
    assert (stored["spec"]["batch_size"], stored["spec"]["max_workers"]) == (4, 1)  # a later resume starts from these
    assert stored["spec_hash"] == regrouped.spec_hash()


def agent_steps(run, agent_id: int) -> int:
    """The steps the agent's committed workspace has counted."""
    workspace = agent_workspace(run, agent_id)
    assert workspace is not None
    return int(workspace.read_json("AGENT.json")["step_count"])


async def test_resume_refuses_a_changed_spec(shell, tmp_path):
    run = tmp_path / "run"
    assert (await run_experiment(small_spec(), run, shell)).status == "completed"
    changed = await run_experiment(small_spec(seed=99), run, shell, resume=True)
    assert changed.status == "failed"
    assert "differs" in changed.error and "--force" in changed.error


async def test_a_questionnaire_stopped_by_the_budget_counts_what_it_spent_and_resumes(shell, tmp_path):
    population = [{"count": 4, "profile_template": {"name": "P{i}"}, "config": {"max_react_turns": 1, "tools": ["finish"]}}]
    steps = [
        {"type": "run", "num_steps": 1, "tick": 600},
        {"type": "questionnaire", "questionnaire_id": "q", "questions": [{"id": "a", "prompt": "Age?", "response_type": "integer"}]},
    ]
    run = tmp_path / "run"
    stopped = await run_experiment(small_spec(population=population, steps=steps, batch_size=2, budget={"max_calls": 6}), run, shell)
    assert stopped.status == "budget_exhausted"
    status = json.loads((run / "SOCIETY_STEP.json").read_text())
    assert status["extra"]["usage"]["calls"] == 6  # 4 agent-steps + the 2 answers the budget allowed

    resumed = await run_experiment(small_spec(population=population, steps=steps, batch_size=2, budget={"max_calls": 100}),
                                   run, shell, resume=True)
    assert resumed.status == "completed", resumed.error
    assert resumed.provider_calls == 8 + 1  # the 2 answers given before the stop came from the cache; + the world description
    with ReplayReader(run) as reader:
        assert reader.count("questionnaire_answers") == 4
