"""A plugin module that only queues its updates is exactly-once when agent-steps are re-run: through
the proxy to the actor (in this process). In a run whose batch worker is SIGKILLed mid-tick, it is in
``tests/engine/society/test_worker_death.py``."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta

import pytest

from engine.env.actor import EnvRouterActor, EnvRouterConfig
from engine.env.control import EndTick
from engine.env.proxy import EnvRequests, InProcessEnvProxy
from tests.engine.env.plugin_modules import register_plugin_modules, unregister_plugin_modules

START = datetime(2026, 1, 1, 8)
AGENTS = 6
TICKS = 3


@pytest.fixture
def plugin_modules():
    register_plugin_modules()
    try:
        yield
    finally:
        unregister_plugin_modules()


async def _failed_then_retried(proxy: EnvRequests, agent_id: int) -> int:
    """In a batch: an agent-step adds points, fails, is undone (discard) and re-run."""
    await proxy.call_tool("add", {"agent_id": agent_id, "points": 5})
    dropped = await proxy.discard_pending(agent_id)
    await proxy.call_tool("add", {"agent_id": agent_id, "points": 5})
    return dropped


async def _once(proxy: EnvRequests, agent_id: int) -> None:
    await proxy.call_tool("add", {"agent_id": agent_id, "points": 7})


async def _tally(proxy: EnvRequests, agent_id: int) -> str:
    return await proxy.observe(agent_id)


async def test_discard_through_the_proxy_drops_a_failed_steps_updates_of_a_plugin_that_overrides_nothing(plugin_modules, tmp_path):
    handle = EnvRouterActor(EnvRouterConfig(modules=(("TallySpace", {}),), run_dir=tmp_path))
    await handle.init(START, [1, 2])

    def proxy() -> InProcessEnvProxy:  # each batch's own handle on the actor
        return InProcessEnvProxy(handle.ask_many)

    dropped, _ = await asyncio.gather(_failed_then_retried(proxy(), 1), _once(proxy(), 2))
    await handle.end_tick(EndTick(1, 3600, START + timedelta(hours=1), 1, "run-1"))

    assert dropped == 1
    assert await _tally(proxy(), 1) == "tally 5"
    assert await _tally(proxy(), 2) == "tally 7"
    await handle.close()
