"""Template-mode asks through the env actor: the fields cross the boundary, the cache is counted per
step, and its counts and file survive an actor rebuilt from a snapshot: the actor object, in this process
(the fields' crossing into a real Dask actor is in ``tests/engine/society/shells/test_on_dask.py``)."""

from __future__ import annotations

import asyncio
import io
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine.env.actor import EnvRouterActor, EnvRouterConfig
from engine.env.control import EndTick
from engine.env.proxy import EnvRequests, InProcessEnvProxy
from engine.env.requests import EnvRequest
from engine.storage.run_layout import run_store

START = datetime(2026, 1, 1, 8)
SEND = "send a message to agent {agent} saying '{text}'"


def codegen_config(run_dir: Path, **changes) -> EnvRouterConfig:
    return EnvRouterConfig(modules=(("MessagingSpace", {}),), router="codegen", run_dir=run_dir, **changes)


async def ask_as(proxy: EnvRequests, asks: list[tuple[int, int, str]]) -> list[str]:
    """In a batch: each (sender, recipient, text) asks the same template with its own variables."""
    replies = await asyncio.gather(*(
        proxy.ask(EnvRequest("ask", sender, SEND, template_mode=True, variables={"agent": to, "text": text}))
        for sender, to, text in asks
    ))
    return [reply.status for reply in replies]


def test_template_fields_default_to_a_plain_ask() -> None:
    request = EnvRequest("ask", 3, "look around")
    assert (request.template_mode, request.variables) == (False, None)


async def test_a_plain_router_serves_template_asks_and_reports_no_cache(tmp_path):
    config = EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react", run_dir=tmp_path)
    handle = EnvRouterActor(config)
    await handle.init(START, list(range(10)))
    statuses = await ask_as(InProcessEnvProxy(handle.ask_many), [(1, 2, "hello")])
    usage = await handle.usage()
    result = await handle.end_tick(EndTick(1, 600, START, 1, "run-1"))
    assert len(statuses) == 1 and "codegen_cache" not in usage and "codegen_cache" not in result.counts


def _row(run: Path, staged: tuple[str, ...]) -> dict:
    [key] = [k for k in staged if "/codegen_cache/" in k]
    return pq.read_table(io.BytesIO(run_store(run).get(key))).to_pylist()[0]


async def test_a_rebuilt_actor_continues_the_counts_and_reuses_the_cache_file(tmp_path):
    first = EnvRouterActor(codegen_config(tmp_path))
    await first.init(START, list(range(10)))
    for sender in (1, 2):
        await first.ask_many([EnvRequest("ask", sender, SEND, template_mode=True, variables={"agent": 5, "text": "hi"})])
    step1 = await first.end_tick(EndTick(1, 600, START, 1, "run-1"))
    assert (_row(tmp_path, step1.staged)["requests"], _row(tmp_path, step1.staged)["generations"]) == (2, 1)

    # The worker holding the actor dies; the society starts a new one from the committed snapshot.
    second = EnvRouterActor(codegen_config(tmp_path))
    await second.init(START, list(range(10)), step1.snapshot)
    assert (await second.usage())["codegen_cache"] == (await first.usage())["codegen_cache"]
    [reply] = await second.ask_many([EnvRequest("ask", 3, SEND, template_mode=True, variables={"agent": 6, "text": "yo"})])
    step2 = await second.end_tick(EndTick(2, 600, START, 2, "run-1"))

    # a hit on the reloaded file; the world description too came from the run's file: no call at all
    assert reply.status == "success" and second.router.meter.calls == 0
    row = _row(tmp_path, step2.staged)
    assert (row["step"], row["requests"], row["hits_exact"], row["misses"], row["generations"]) == (2, 1, 1, 0, 0)
    assert row["hit_rate"] == pytest.approx(2 / 3)
    assert (await second.usage())["codegen_cache"]["requests"] == 3


async def test_a_shared_cache_directory_lets_the_next_run_start_warm(tmp_path):
    shared = tmp_path / "home" / "codegen_cache"
    first = EnvRouterActor(codegen_config(tmp_path / "run-a", template_cache_dir=shared))
    await first.init(START, list(range(10)))
    await first.ask_many([EnvRequest("ask", 1, SEND, template_mode=True, variables={"agent": 2, "text": "hi"})])

    second = EnvRouterActor(codegen_config(tmp_path / "run-b", template_cache_dir=shared))
    await second.init(START, list(range(10)))
    [reply] = await second.ask_many([EnvRequest("ask", 3, SEND, template_mode=True, variables={"agent": 4, "text": "yo"})])

    assert reply.status == "success"
    assert (await second.usage())["codegen_cache"]["hits_exact"] == 1
    assert [r.prompt_name for r in second.router.meter.records] == ["env.world_description"]  # no routing call
    assert [p.name for p in shared.iterdir()] == [f"{second.router.config_hash}.json"]
    assert not (tmp_path / "run-b" / "env" / "_codegen_cache").exists()
