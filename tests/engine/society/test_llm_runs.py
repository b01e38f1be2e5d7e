"""Run-level LLM behaviour on a real LocalCluster: dispatch reuse, secrets, cache replays, budgets."""

from __future__ import annotations

import json

import httpx
import pytest

from engine.llm.sim import SimLLM
from engine.llm.sim.background import serving
from engine.society.run.runner import run_experiment
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


async def test_llm_backend_is_built_once_per_worker_process_across_ticks(dask_client, tmp_path):
    spec = small_spec(steps=[{"type": "run", "num_steps": 3, "tick": 600}], batch_size=2)  # 4 batches x 3 ticks
    summary = await run_experiment(spec, tmp_path / "run", dask_client)
    assert summary.status == "completed", summary.error
    # 12 batches ran on 2 worker processes. Each process built this run's backend during its first
    # batch and reused it through the last batch of tick 3: the count did not move after that.
    assert len(summary.dispatcher_builds) == 2
    assert all(first == last for first, last in summary.dispatcher_builds.values())


async def test_a_secret_named_by_env_var_never_reaches_the_run_dir(dask_client, tmp_path, sim_url, monkeypatch):
    monkeypatch.setenv("POLIS_TEST_SECRET", SECRET)
    # Workers inherit the variable at start; set it there as a deployment would.
    await dask_client.run(lambda: __import__("os").environ.__setitem__("POLIS_TEST_SECRET", SECRET))
    summary = await run_experiment(small_spec(llm=http_llm(sim_url)), tmp_path / "run", dask_client)
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


async def test_rerun_from_the_cache_makes_no_call_and_repeats_the_actions(dask_client, tmp_path, sim_url):
    await dask_client.run(lambda: __import__("os").environ.__setitem__("POLIS_TEST_SECRET", SECRET))
    spec = small_spec(llm=http_llm(sim_url))
    cache = tmp_path / "cache"
    first = await run_experiment(spec, tmp_path / "a", dask_client, llm_cache_dir=cache)
    calls_after_first = sim_calls(sim_url)
    second = await run_experiment(spec, tmp_path / "b", dask_client, llm_cache_dir=cache)

    assert first.status == second.status == "completed"
    assert first.provider_calls > 0
    assert second.provider_calls == 0
    assert sim_calls(sim_url) == calls_after_first
    query = "SELECT * EXCLUDE (run, duration_ms, llm_latency_ms) FROM actions ORDER BY step, agent_id"
    with ReplayReader(tmp_path / "a") as a, ReplayReader(tmp_path / "b") as b:
        assert a.query(query).to_pylist() == b.query(query).to_pylist()
        assert b.query("SELECT bool_and(cached) AS all_cached FROM llm_calls").column(0)[0].as_py() is True


async def test_budget_stops_within_one_batch_then_resumes_after_raising_it(dask_client, tmp_path):
    # One decision per agent-step and no env asks: exactly one provider call per agent-step.
    population = [{"count": 8, "profile_template": {"name": "P{i}"}, "config": {"max_react_turns": 1, "tools": ["finish"]}}]
    k = 11
    spec = small_spec(population=population, budget={"max_calls": k})
    run = tmp_path / "run"
    stopped = await run_experiment(spec, run, dask_client)

    assert stopped.status == "budget_exhausted"
    assert k - 3 <= stopped.provider_calls <= k  # batch size 3: within one batch of K
    # The stopped tick is not committed: readers see tick 1 only; its agents' rows wait staged.
    with ReplayReader(run) as reader:
        assert reader.count("actions") == 8
        assert reader.query("SELECT max(step) AS s FROM actions").column("s")[0].as_py() == 1
    assert list(run.glob("replay/actions/*.staged-*"))

    resumed = await run_experiment(small_spec(population=population, budget={"max_calls": 100}), run, dask_client, resume=True)
    assert resumed.status == "completed", resumed.error
    with ReplayReader(run) as reader:
        rows = reader.query("SELECT agent_id, step, count(*) AS n FROM actions GROUP BY ALL").to_pylist()
    assert len(rows) == 8 * 2 and {r["n"] for r in rows} == {1}
    # The re-run of the stopped tick replays the agents that had finished it from the response
    # cache: the provider saw exactly one call per agent-step over the whole run, plus the world
    # description (asked once, in the first session; the resumed one read the run's file).
    assert resumed.provider_calls == 16 + 1
    assert not list(run.rglob("*.staged-*"))


async def test_resume_refuses_a_changed_spec(dask_client, tmp_path):
    run = tmp_path / "run"
    assert (await run_experiment(small_spec(), run, dask_client)).status == "completed"
    changed = await run_experiment(small_spec(seed=99), run, dask_client, resume=True)
    assert changed.status == "failed"
    assert "differs" in changed.error and "--force" in changed.error


async def test_a_questionnaire_stopped_by_the_budget_counts_what_it_spent_and_resumes(dask_client, tmp_path):
    population = [{"count": 4, "profile_template": {"name": "P{i}"}, "config": {"max_react_turns": 1, "tools": ["finish"]}}]
    steps = [
        {"type": "run", "num_steps": 1, "tick": 600},
        {"type": "questionnaire", "questionnaire_id": "q", "questions": [{"id": "a", "prompt": "Age?", "response_type": "integer"}]},
    ]
    run = tmp_path / "run"
    stopped = await run_experiment(small_spec(population=population, steps=steps, batch_size=2, budget={"max_calls": 6}), run, dask_client)
    assert stopped.status == "budget_exhausted"
    status = json.loads((run / "SOCIETY_STEP.json").read_text())
    assert status["extra"]["usage"]["calls"] == 6  # 4 agent-steps + the 2 answers the budget allowed

    resumed = await run_experiment(small_spec(population=population, steps=steps, batch_size=2, budget={"max_calls": 100}),
                                   run, dask_client, resume=True)
    assert resumed.status == "completed", resumed.error
    assert resumed.provider_calls == 8 + 1  # the 2 answers given before the stop came from the cache; + the world description
    with ReplayReader(run) as reader:
        assert reader.count("questionnaire_answers") == 4
