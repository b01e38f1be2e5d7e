"""The env router inside a real Dask actor, reached through EnvRouterProxy from batch tasks."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from engine.env.actor import EnvRouterActor, EnvRouterConfig
from engine.env.proxy import EnvRouterProxy
from engine.errors import ToolCallError

START = datetime(2026, 1, 1, 8)


async def _send_all(proxy: EnvRouterProxy, senders: list[int]) -> int:
    await asyncio.gather(*(
        proxy.call_tool("send_message", {"agent_id": a, "to_agent_id": 0, "content": f"from {a}"}) for a in senders
    ))
    return len(senders)


async def _inbox_of_0(proxy: EnvRouterProxy) -> str:
    return await proxy.observe(0)


async def _refused(proxy: EnvRouterProxy) -> str:
    try:
        await proxy.call_tool("send_message", {"agent_id": 1, "to_agent_id": 999, "content": "x"})
    except ToolCallError as error:
        return str(error)
    return "accepted"


@pytest.fixture
async def actor(dask_client, tmp_path):
    config = EnvRouterConfig(modules=(("MessagingSpace", {}),), run_dir=tmp_path)
    handle = await dask_client.submit(EnvRouterActor, config, actor=True)
    info = await handle.init(START, list(range(200)))
    return handle, EnvRouterProxy(address=handle._address, key=handle.key, env_skill_dirs=tuple(map(tuple, info["env_skill_dirs"])))


async def test_200_concurrent_calls_from_two_tasks_lose_no_update(dask_client, actor):
    handle, proxy = actor
    halves = [list(range(0, 100)), list(range(100, 200))]
    sent = await dask_client.gather([dask_client.submit(_send_all, proxy, half, pure=False) for half in halves])
    await handle.step(1, 600, START, 1)
    usage = await handle.usage()

    inbox = await dask_client.submit(_inbox_of_0, proxy, pure=False)

    assert sum(sent) == 200
    assert inbox.startswith("Inbox (200 messages")
    assert usage["requests"] == 200
    assert usage["batches"] < 20  # coalesced: far fewer actor calls than requests


async def test_a_refused_direct_tool_call_raises_tool_call_error_in_the_task(dask_client, actor):
    _, proxy = actor
    message = await dask_client.submit(_refused, proxy, pure=False)
    assert "there is no agent 999" in message
