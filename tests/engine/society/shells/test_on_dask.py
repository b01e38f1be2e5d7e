"""The Dask shell (:mod:`engine.society.shells.on_dask`) on the session's real LocalCluster: what only a cluster has.

Every other run-level test uses the in-process shell, which runs the same society code with the batch jobs as tasks
on this event loop and the env router as an object here. These tests cover what that cannot show: the env router
lives in a Dask actor on a worker, batch tasks reach it through ``EnvRouterProxy`` (template asks cross with their
variables; a lost or released actor fails requests at once), LLM-call counts travel from worker processes over
Dask's topic while a batch runs, each worker process builds a run's LLM backend once, and batches spread over every
worker's task slots, and preflight probes every worker. Worker death is in ``tests/engine/society/test_worker_death.py``.

The live-count test holds the simulated LLM (over HTTP) at its gate: once tick 1 has begun, every chat call after
the first waits until the driver has reported a call of tick 1. That can only come from a live count, since the
tick's one batch cannot end while its agents' calls are held; so the test shows the live path without asking how
fast anything is.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from engine.env.actor import EnvRouterActor, EnvRouterConfig
from engine.env.control import EndTick
from engine.env.proxy import EnvRouterProxy, fail_env_actor
from engine.errors import EnvUnavailableError, PreflightError
from engine.llm.client import LLMClient
from engine.llm.sim import SimFaults, SimLLM
from engine.llm.sim.background import serving, serving_app
from engine.llm.sim.server import create_app
from engine.run_progress import RunPhase, RunProgress
from engine.society.fanout import task_slots
from engine.society.questionnaire.batch import distribute_questionnaire, questionnaire_artifact
from engine.society.run.preflight import preflight
from engine.society.run.runner import run_experiment
from engine.society.shells import DaskShell
from engine.society.tick_core import MIN_SPREAD
from engine.storage.catalog import Catalog
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import run_store
from engine.storage.staging import commit_staged, staged_txn
from tests.engine.env.test_actor_template_mode import ask_as, codegen_config
from tests.engine.society.test_live_progress_run import spec as progress_spec
from tests.engine.society.test_llm_runs import small_spec
from tests.engine.society.test_planning import spread_spec
from tests.engine.society.test_preflight import closed_port
from tests.engine.society.test_questionnaire_runs import MOODS, SURVEY, T, answer_proxy, digest, make_agents

START = datetime(2026, 1, 1, 8)


# ---- the env router in a Dask actor ---------------------------------------------------------------------

async def test_env_router_lives_inside_a_dask_actor_on_a_worker(dask_client, tmp_path):
    config = EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react", run_dir=tmp_path)
    actor = await dask_client.submit(EnvRouterActor, config, actor=True)
    where = await actor.where()
    worker_pids = await dask_client.run(os.getpid)  # {worker address: pid}

    assert where["address"] in worker_pids
    assert where["pid"] == worker_pids[where["address"]]
    assert where["pid"] != os.getpid()


@pytest.fixture
async def actor(dask_client, tmp_path):
    config = EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react", run_dir=tmp_path)
    handle = await dask_client.submit(EnvRouterActor, config, actor=True)
    info = await handle.init(START, list(range(200)))
    return handle, EnvRouterProxy(address=handle._address, key=handle.key, env_skill_dirs=tuple(map(tuple, info["env_skill_dirs"])))


async def _refused_as_unavailable(proxy: EnvRouterProxy) -> str:
    try:
        await proxy.observe(1)
    except EnvUnavailableError as error:
        return f"EnvUnavailableError: {error}"
    return "answered"


async def test_a_lost_actor_still_fails_requests_with_env_unavailable_not_an_error_reply(dask_client, actor):
    _, proxy = actor
    await dask_client.run(fail_env_actor, proxy.key, "the test says so")
    message = await dask_client.submit(_refused_as_unavailable, proxy, pure=False)
    assert message.startswith("EnvUnavailableError: env actor") and "was lost" in message


async def _observe_with_a_deadline(proxy: EnvRouterProxy, seconds: float) -> str:
    try:
        await asyncio.wait_for(proxy.observe(1), seconds)
    except EnvUnavailableError as error:
        return f"EnvUnavailableError: {error}"
    except TimeoutError:
        return "still waiting"
    return "answered"


async def test_a_request_to_a_released_actor_fails_at_once_instead_of_waiting_forever(dask_client, tmp_path):
    # What a batch still running after its run was stopped meets: the society has released the
    # actor's key, so the worker no longer holds it. Dask's own handle would wait forever here
    # (the worker's KeyError escapes its callback), holding the worker's only task slot.
    config = EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react", run_dir=tmp_path)
    future = dask_client.submit(EnvRouterActor, config, actor=True)
    handle = await future
    await handle.init(START, [1])
    proxy = EnvRouterProxy(address=handle._address, key=handle.key)
    del handle
    await dask_client.cancel([future])
    del future
    message = await dask_client.submit(_observe_with_a_deadline, proxy, 20.0, pure=False)
    assert message.startswith("EnvUnavailableError: env actor") and "no longer holds it" in message, message


async def _inbox(proxy: EnvRouterProxy, agent_id: int) -> str:
    return await proxy.observe(agent_id)


async def test_template_asks_cross_the_actor_with_their_variables(dask_client, tmp_path):
    handle = await dask_client.submit(EnvRouterActor, codegen_config(tmp_path), actor=True)
    await handle.init(START, list(range(10)))
    proxy = EnvRouterProxy(address=handle._address, key=handle.key)

    asks = [(1, 2, "hello"), (3, 4, "tea?"), (5, 6, "bye")]
    statuses = await dask_client.submit(ask_as, proxy, asks, pure=False)
    usage = await handle.usage()
    result = await handle.end_tick(EndTick(1, 600, START, 1, "run-1"))
    inboxes = [await dask_client.submit(_inbox, proxy, to, pure=False) for _, to, _ in asks]

    assert statuses == ["success"] * 3
    cache = usage["codegen_cache"]
    assert (cache["requests"], cache["generations"], cache["hits_exact"] + cache["misses"]) == (3, 1, 3)
    assert usage["calls"] == 1 + 1  # one coder call served all three agents (+ the world description at init)
    assert [inbox.splitlines()[1] for inbox in inboxes] == [f"- from agent {s}: {text}" for s, _, text in asks]
    assert result.counts["codegen_cache"] == 1
    assert "codegen_cache" in Catalog(tmp_path / "replay").load()


# ---- preflight: every worker reaches the LLMs -----------------------------------------------------------

async def test_preflight_passes_on_a_local_cluster_with_a_loopback_server(dask_client, tmp_path):
    with serving(SimLLM(name="x", seed=1)) as url:
        clients = {"agent": LLMClient(model="openai/sim", base_url=f"{url}/v1"), "coder": LLMClient(model="local/smollm2")}
        report = await preflight(dask_client, tmp_path, clients, timeout_s=20)
    assert len(report.workers) == 2 and all(w.token_content for w in report.workers)
    assert not (tmp_path / ".preflight").exists()


async def test_preflight_refuses_an_unreachable_server_on_a_local_cluster(dask_client, tmp_path):
    port = closed_port()
    clients = {"agent": LLMClient(model="openai/sim", base_url=f"http://127.0.0.1:{port}/v1")}
    with pytest.raises(PreflightError) as caught:
        await preflight(dask_client, tmp_path, clients, timeout_s=20, connect_timeout_s=1)
    assert len(caught.value.workers) == 2
    assert f"cannot reach LLM role 'agent' at http://127.0.0.1:{port}/v1" in str(caught.value)


# ---- batches over the workers --------------------------------------------------------------------------

async def test_task_slots_are_the_workers_threads_capped_by_max_workers(dask_client):
    threads = sum((await dask_client.nthreads()).values())
    assert threads >= 2
    assert await task_slots(dask_client) == threads
    assert await task_slots(dask_client, 1) == 1
    assert await task_slots(dask_client, 10_000) == threads


async def test_a_run_of_fewer_agents_than_batch_size_uses_every_worker(dask_client, tmp_path):
    slots = await task_slots(dask_client)
    summary = await run_experiment(spread_spec(), tmp_path / "run", dask_client)
    assert summary.status == "completed", summary.error
    # 64 agents under the default batch_size of 256: one batch a task slot (16 agents each), on both workers
    assert len(summary.dispatcher_builds) == 2
    shards = sorted(p.name for p in (tmp_path / "run" / "replay" / "actions").glob("step_000001-*.parquet"))
    assert len(shards) == min(slots, 64 // MIN_SPREAD)
    with ReplayReader(tmp_path / "run") as reader:
        per_step = reader.query("SELECT step, count(DISTINCT agent_id) AS n FROM actions GROUP BY step ORDER BY step").to_pylist()
    assert per_step == [{"step": 1, "n": 64}, {"step": 2, "n": 64}]


async def test_a_questionnaire_over_100_agents_gives_100_x_4_typed_rows(dask_client, tmp_path):
    # On the cluster: the batches spread over its two worker processes.
    run = tmp_path / "run"
    make_agents(run, range(100))
    before = digest(run / "agents")
    batches = []

    response, paths = await distribute_questionnaire(
        DaskShell(dask_client), SURVEY, list(range(100)), proxy=answer_proxy(run), txn=5, step_count=2, step_index=1, t=T,
        batch_size=13, max_workers=2, on_batch=batches.append,
    )

    assert len(batches) == 8 and sorted(b.batch for b in batches) == list(range(8))
    assert len({b.worker_pid for b in batches}) == 2  # both workers answered
    assert (response.ok, response.failed, response.agents, response.agents_answered) == (400, 0, 100, 100)
    assert response.llm_calls == 100 and response.usage.calls == 100
    assert all(staged_txn(p) is not None and staged_txn(p)[1] == 5 for p in paths)
    with ReplayReader(run) as reader:  # staged rows stay invisible until the transaction commits
        assert reader.count("questionnaire_answers") == 0
    assert commit_staged(run_store(run), paths) == len(paths)

    with ReplayReader(run) as reader:
        assert reader.count("questionnaire_answers") == 400
        per_agent = reader.query(
            "SELECT agent_id, count(*) AS n, count(DISTINCT question_id) AS q FROM questionnaire_answers GROUP BY ALL"
        ).to_pylist()
        assert len(per_agent) == 100 and {(r["n"], r["q"]) for r in per_agent} == {(4, 4)}
        rows = reader.query("SELECT * FROM questionnaire_answers ORDER BY agent_id, question_id").to_pylist()
        assert {(r["run"], r["questionnaire_id"], r["step_index"], r["step"], r["t"]) for r in rows} == {
            ("qrun", "wellbeing", 1, 2, T)
        }
        assert all(r["parse_success"] and r["error"] is None and r["attempts"] == 1 and r["reason"] for r in rows)
        by_q: dict[str, list[dict]] = {}
        for r in rows:
            by_q.setdefault(r["question_id"], []).append(r)
        assert all(isinstance(r["value_int"], int) and 1 <= r["value_int"] <= 7 for r in by_q["happiness"])
        assert all(0.0 <= r["value_float"] <= 1.0 and r["value_int"] is None for r in by_q["trust"])
        assert all(r["value_text"] in MOODS for r in by_q["mood"])
        assert all(r["value_text"].strip() and r["value_float"] is None for r in by_q["note"])
        assert all(json.loads(r["value_json"]) == r["value_int"] for r in by_q["happiness"])
        assert len({r["value_int"] for r in by_q["happiness"]}) > 1  # answers depend on the agent
        calls = reader.query(
            "SELECT count(*) AS n, count(DISTINCT caller) AS callers, min(step) AS s, max(step) AS s2, "
            "min(prompt_name) AS p, max(prompt_name) AS p2 FROM llm_calls"
        ).to_pylist()[0]
        assert calls == {"n": 100, "callers": 100, "s": 2, "s2": 2, "p": "questionnaire.answer", "p2": "questionnaire.answer"}
        spans = reader.query("SELECT count(*) AS n FROM spans WHERE name = 'agent.questionnaire'").column("n")[0].as_py()
        assert spans == 100

    artifact = questionnaire_artifact(1, "wellbeing")
    assert artifact == "artifacts/questionnaire-001-wellbeing.json"
    doc = json.loads((run / artifact).read_text())
    assert doc["ok"] == 400 and len(doc["answers"]) == 400 and doc["agents_answered"] == 100
    # Interviewing must not change the subject: every workspace file is byte-for-byte as before.
    assert digest(run / "agents") == before


async def test_llm_backend_is_built_once_per_worker_process_across_ticks(dask_client, tmp_path):
    # On the cluster: its subject is the backend each worker process builds.
    spec = small_spec(steps=[{"type": "run", "num_steps": 3, "tick": 600}], batch_size=2)  # 4 batches x 3 ticks
    summary = await run_experiment(spec, tmp_path / "run", dask_client)
    assert summary.status == "completed", summary.error
    # 12 batches ran on 2 worker processes. Each process built this run's backend during its first
    # batch and reused it through the last batch of tick 3: the count did not move after that.
    assert len(summary.dispatcher_builds) == 2
    assert all(first == last for first, last in summary.dispatcher_builds.values())


# ---- live LLM-call counts from the workers -----------------------------------------------------------

#: How long a held call waits for the gate before it goes on anyway (a broken live path fails the test, not hangs it).
GATE_TIMEOUT_S = 60.0


class GatedSim:
    """The simulated LLM's app: once :attr:`armed`, it holds every chat call after the first until :attr:`gate` opens
    (before, calls pass: the env router describes the environment as it starts)."""

    def __init__(self) -> None:
        self.app = create_app(SimLLM(name="gated", seed=5), SimFaults())
        self.armed = threading.Event()
        self.gate = threading.Event()
        self.calls = 0  #: chat calls since it was armed
        self.timed_out = 0  #: held calls that went on because the gate never opened

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/chat/completions") and self.armed.is_set():
            self.calls += 1
            if self.calls > 1 and not await asyncio.get_running_loop().run_in_executor(None, self.gate.wait, GATE_TIMEOUT_S):
                self.timed_out += 1
        await self.app(scope, receive, send)


@pytest.fixture
def gated() -> Iterator[tuple[GatedSim, str]]:
    """A :class:`GatedSim` on a real uvicorn server in a background thread, and its base URL."""
    app = GatedSim()
    try:
        with serving_app(app) as url:
            yield app, f"{url}/v1"
    finally:
        app.gate.set()


def increases(reports: list[RunProgress]) -> int:
    return sum(1 for before, after in zip(reports, reports[1:], strict=False) if after.llm_calls > before.llm_calls)


async def test_llm_calls_are_reported_as_they_happen_not_once_per_batch(dask_client, gated, tmp_path: Path) -> None:
    sim, url = gated
    reports: list[RunProgress] = []

    def on_progress(report: RunProgress) -> None:
        reports.append(report)
        if report.phase == RunPhase.TICK and report.ticks_done == 0:
            sim.armed.set()  # reported before the tick's batch is submitted: its agents' calls meet the gate
            if report.llm_calls > 0:
                sim.gate.set()  # a call of tick 1 reached the driver while its batch is held

    # 3 agents are one batch (engine.society.tick_core.MIN_SPREAD), so a per-batch count would move once in tick 1.
    summary = await run_experiment(progress_spec({"model": "openai/sim", "base_url": url}, [{"type": "run", "num_steps": 2, "tick": 600}]),
                                   tmp_path / "run", dask_client, on_progress=on_progress)

    assert summary.status == "completed", summary.error
    assert sim.gate.is_set() and sim.timed_out == 0
    tick_1 = [r for r in reports if r.ticks_done == 0 and r.phase == RunPhase.TICK]
    assert increases(tick_1) >= 2  # the live count (during the batch), then the rest (later messages or the result)
    calls = [r.llm_calls for r in reports]
    assert calls == sorted(calls)  # the batch result replaced the live estimate: the count never went back
    with ReplayReader(tmp_path / "run") as reader:
        agent_calls = reader.query("SELECT sum(llm_calls) AS n FROM actions").column("n")[0].as_py()
        recorded = reader.count("llm_calls")
    assert reports[-2].llm_calls == agent_calls  # the batches' count never counted a call twice ...
    assert reports[-1].llm_calls == summary.llm_calls == recorded  # ... and the last report counts every recorded call
