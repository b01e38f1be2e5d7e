"""Template-mode asks through the env actor: the fields cross the boundary, the cache is counted per
step, and its counts and file survive an actor rebuilt from a snapshot."""

from __future__ import annotations

import asyncio
import io
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine.env.actor import EnvRouterActor, EnvRouterConfig
from engine.env.control import EndTick
from engine.env.proxy import EnvRouterProxy
from engine.env.requests import EnvRequest
from engine.storage.catalog import Catalog
from engine.storage.run_layout import run_store

START = datetime(2026, 1, 1, 8)
SEND = "send a message to agent {agent} saying '{text}'"


def codegen_config(run_dir: Path, **changes) -> EnvRouterConfig:
    return EnvRouterConfig(modules=(("MessagingSpace", {}),), router="codegen", run_dir=run_dir, **changes)


async def _ask_as(proxy: EnvRouterProxy, asks: list[tuple[int, int, str]]) -> list[str]:
    """On a worker: each (sender, recipient, text) asks the same template with its own variables."""
    replies = await asyncio.gather(*(
        proxy.ask(EnvRequest("ask", sender, SEND, template_mode=True, variables={"agent": to, "text": text}))
        for sender, to, text in asks
    ))
    return [reply.status for reply in replies]


async def _inbox(proxy: EnvRouterProxy, agent_id: int) -> str:
    return await proxy.observe(agent_id)


def test_template_fields_default_to_a_plain_ask() -> None:
    request = EnvRequest("ask", 3, "look around")
    assert (request.template_mode, request.variables) == (False, None)


async def test_template_asks_cross_the_actor_with_their_variables(dask_client, tmp_path):
    handle = await dask_client.submit(EnvRouterActor, codegen_config(tmp_path), actor=True)
    await handle.init(START, list(range(10)))
    proxy = EnvRouterProxy(address=handle._address, key=handle.key)

    asks = [(1, 2, "hello"), (3, 4, "tea?"), (5, 6, "bye")]
    statuses = await dask_client.submit(_ask_as, proxy, asks, pure=False)
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


async def test_a_plain_router_serves_template_asks_and_reports_no_cache(dask_client, tmp_path):
    config = EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react", run_dir=tmp_path)
    handle = await dask_client.submit(EnvRouterActor, config, actor=True)
    await handle.init(START, list(range(10)))
    proxy = EnvRouterProxy(address=handle._address, key=handle.key)
    statuses = await dask_client.submit(_ask_as, proxy, [(1, 2, "hello")], pure=False)
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
