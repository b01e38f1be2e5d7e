"""Whole runs on a real external cluster (``dask scheduler`` + ``dask worker`` processes) over HTTP to
``polis sim-llm`` in its own process, through the doors users take: ``polis run`` with
``POLIS_SCHEDULER``, and ``run_experiment`` on a Client of that scheduler."""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from distributed import Client

from engine.failpoints import arm
from engine.llm.sim.process import SimLLMProcess, sim_llm_process
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader
from tests.engine.society import external_cluster as cluster_fixtures
from tests.engine.society.crash_support import final_state, write_spec
from tests.engine.society.external_cluster import ExternalCluster, env_actor_worker
from tests.engine.society.test_external_cluster import _can_unshare

external_cluster = cluster_fixtures.external_cluster  # the shared module-scoped fixture, for pytest to find

AGENTS = 8


@pytest.fixture(scope="module")
def sim_llm() -> Iterator[SimLLMProcess]:
    with sim_llm_process(name="ext", seed=5) as server:
        yield server


def http_spec(base_url: str, ticks: int = 3) -> dict:
    return {
        "name": "external",
        "seed": 21,
        "llm": {"default": {"model": "openai/ext", "base_url": base_url}},
        "population": [{"count": AGENTS, "profile_template": {"name": "Resident {i}"}, "config": {"max_react_turns": 2}}],
        "environment": {"router": "codegen", "modules": [{"type": "MessagingSpace", "kwargs": {"groups": {"street": [0, 1, 2, 3]}}}]},
        "steps": [{"type": "run", "num_steps": ticks, "tick": 3600}],
        "batch_size": 2,
        "max_workers": 2,
    }


def polis_run(cluster: ExternalCluster, spec: Path, run_dir: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "POLIS_SCHEDULER": cluster.address}
    return subprocess.run([sys.executable, "-m", "engine.cli", "run", str(spec), "--run-dir", str(run_dir)],
                          capture_output=True, text=True, timeout=240, env=env, cwd=cluster.root)


def once_per_tick(run_dir: Path) -> list[dict]:
    with ReplayReader(run_dir) as reader:
        return reader.query("SELECT agent_id, step, count(*) AS n FROM actions GROUP BY ALL ORDER BY ALL").to_pylist()


def test_polis_run_over_http_on_an_external_cluster_steps_every_agent_once_per_tick(external_cluster, sim_llm, tmp_path):
    calls_before = sum(sim_llm.stats()["calls"].values())
    run = polis_run(external_cluster, write_spec(tmp_path / "spec.yaml", http_spec(sim_llm.base_url)), tmp_path / "runs" / "r")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "status: completed\n" in run.stdout and "errors: 0" in run.stdout
    rows = once_per_tick(tmp_path / "runs" / "r")
    assert len(rows) == AGENTS * 3 and {r["n"] for r in rows} == {1}
    with ReplayReader(tmp_path / "runs" / "r") as reader:
        calls = reader.count("llm_calls")
    # every row of llm_calls is a call the server answered (the run's own response cache was empty)
    assert sum(sim_llm.stats()["calls"].values()) - calls_before >= calls > 0
    assert f"LLM calls: {calls} " in run.stdout
    assert "codegen cache: " in run.stdout and " generations (coder calls) for " in run.stdout


async def test_killing_a_worker_mid_tick_ends_identical_to_a_clean_run(external_cluster, sim_llm, tmp_path):
    spec = parse_spec(http_spec(sim_llm.base_url))
    async with Client(external_cluster.address, asynchronous=True) as client:
        reference = await run_experiment(spec, tmp_path / "reference", client)
        assert reference.status == "completed", reference.error
        task = asyncio.get_running_loop().create_task(run_experiment(spec, tmp_path / "run", client))
        while not (tmp_path / "run" / "SOCIETY_STEP.json").exists():
            await asyncio.sleep(0.01)
        actor = await env_actor_worker(client)
        victim = next(address for address in await client.run(os.getpid) if address != actor)
        # the batch worker dies (SIGKILL, no nanny to restart it) right after an agent commits in tick 2
        await client.run(arm, "mid_batch:step=2:kill=self", workers=[victim])
        summary = await task
        remaining = set(await client.run(os.getpid))
    external_cluster.start_worker()  # back to two workers for the tests after this one
    assert victim not in remaining, "the failpoint never killed the worker"
    assert summary.status == "completed", summary.error
    assert summary.replayed + summary.rolled_back >= 1, summary
    state, expected = final_state(tmp_path / "run"), final_state(tmp_path / "reference")
    for key in ("actions", "messaging", "env", "workspaces"):
        assert state[key] == expected[key], key


def test_a_worker_blind_to_the_runs_folder_is_refused_before_tick_0(external_cluster, sim_llm, tmp_path):
    if (reason := _can_unshare()) is not None:
        pytest.skip(reason)
    runs = tmp_path / "runs"
    runs.mkdir()
    blind = external_cluster.start_worker(
        "blind", prefix=["unshare", "--mount", "sh", "-c", f'mount -t tmpfs tmpfs {shlex.quote(str(runs))} && exec "$@"', "sh"])
    try:
        run = polis_run(external_cluster, write_spec(tmp_path / "spec.yaml", http_spec(sim_llm.base_url)), runs / "r")
    finally:
        external_cluster.kill_worker(blind)
    assert run.returncode == 1, run.stdout + run.stderr[-3000:]
    assert "status: failed" in run.stdout and "preflight refused the cluster" in run.stdout
    assert blind.address in run.stdout and "token file" in run.stdout
    assert not (runs / "r" / "agents").exists() and not (runs / "r" / "replay").exists()  # nothing ran


def test_a_tiered_survey_population_on_a_follow_edge_list_runs_on_the_external_cluster(external_cluster, sim_llm, tmp_path):
    """Three tiers dealt from a coded survey (labels from its codebook), following a third party's edge list, run
    by ``polis run`` on the external cluster over HTTP to ``polis sim-llm``: the archetype groups are keyed by the
    labels, each makes one call a tick, and the members reach the env actor without a span each."""
    respondents = 40
    survey = ["respondent,party,age"] + [f"{900 + i},{(1, 2, 9)[i % 3]},{20 + i}" for i in range(respondents)]
    (tmp_path / "survey.csv").write_text("\n".join(survey) + "\n")
    edges = ["source,target"] + [f"{i},{(i * 7 + 3) % respondents}" for i in range(respondents)]
    (tmp_path / "follows.csv").write_text("\n".join(edges) + "\n")
    spec = {
        "name": "tiered-survey", "seed": 4, "llm": {"default": {"model": "openai/ext", "base_url": sim_llm.base_url}},
        "population": [{
            "from": "survey.csv", "config": {"max_react_turns": 1},
            "codebook": {"columns": {"respondent": {"role": "id"}, "age": {"role": "persona"},
                                     "party": {"role": "persona", "labels": {1: "left", 2: "right"}}}, "missing": [9]},
            "tier_mix": {"llm": 0.1, "archetype": 0.6, "rule": 0.3},
            "archetype": {"key": ["party"], "group_size": 10, "options": [
                {"name": "post", "tool": "create_post", "arguments": {"text": "{text}"}}, {"name": "idle"}]},
            "rule": {"policy": "social_poster"},
        }],
        "network": {"layers": {"follow": {"from": "follows.csv", "directed": True}}},
        "environment": {"modules": [{"type": "SocialMediaSpace", "network": {"follows": "follow"}}]},
        "steps": [{"type": "run", "num_steps": 2, "tick": 3600}],
        "batch_size": 8,
    }
    run = polis_run(external_cluster, write_spec(tmp_path / "spec.yaml", spec), tmp_path / "runs" / "r")
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "status: completed\n" in run.stdout
    with ReplayReader(tmp_path / "runs" / "r") as reader:
        def rows(sql: str) -> list[tuple]:
            return [tuple(r.values()) for r in reader.query(sql).to_pylist()]

        tiers = dict(rows("SELECT tier, count(DISTINCT agent_id) FROM actions GROUP BY ALL"))
        per_tick = rows("SELECT DISTINCT count(*) FROM actions GROUP BY step, agent_id")
        groups = reader.query("SELECT step, key ->> 'party' AS party, members, status FROM archetype_decisions ORDER BY ALL").to_pylist()
        calls = dict(rows("SELECT step, count(*) FROM llm_calls WHERE caller LIKE 'archetype:%' GROUP BY ALL"))
        [(joined,)] = rows("SELECT count(*) FROM actions a JOIN llm_calls c USING (call_id) WHERE a.tier = 'archetype'")
        [(member_calls,)] = rows("SELECT count(*) FROM env_tool_calls WHERE tool = 'my_feed' AND span_id IS NULL")
        [(member_spans,)] = rows("SELECT count(*) FROM spans WHERE name = 'env.ask'")
    assert tiers == {"llm": 4, "archetype": 24, "rule": 12}  # the mix's shares of 40 respondents
    assert per_tick == [(1,)]  # every member once a tick
    # groups keyed by the codebook's labels (the code 9 is missing, not a party), at most 10 members each
    assert {g["party"] for g in groups} <= {"left", "right", None} and "left" in {g["party"] for g in groups}
    assert all(g["members"] <= 10 and g["status"] == "ok" for g in groups)
    assert calls == {step: sum(g["step"] == step for g in groups) for step in (1, 2)}  # one call per group a tick
    assert joined == tiers["archetype"] * 2  # every archetype row names its group's call
    assert member_calls == (tiers["archetype"] + tiers["rule"]) * 2  # observed through serve_direct: no span
    assert member_spans >= tiers["llm"] * 2  # the LLM agents' observes still have theirs
