"""Concurrency-safe modules' tools run side by side in the env actor; other modules' tools one at a time."""

from __future__ import annotations

import asyncio
import json
from datetime import datetime

import pytest

from engine.env.actor import EnvRouterActor, EnvRouterConfig
from engine.env.proxy import EnvRequests, InProcessEnvProxy
from engine.env.registry import env_module_names, resolve_env_module
from engine.env.requests import EnvRequest
from engine.env.routers.react import ReActRouter
from engine.llm.backends.scripted import ScriptedModel
from tests.engine.env.plugin_modules import (
    SlowPrivateSpace,
    SlowSharedSpace,
    register_plugin_modules,
    unregister_plugin_modules,
)

START = datetime(2026, 1, 1, 8)
#: Modules whose tools touch only the caller's own state (and static data).
SAFE = {"MobilitySpace"}


@pytest.fixture
def plugin_modules():
    register_plugin_modules()
    try:
        yield
    finally:
        unregister_plugin_modules()


async def _two_lookups_then_log(proxy: EnvRequests) -> list[list[object]]:
    """In a batch task: two agents' lookups at once (each awaits 0.3 s), then the module's log of them."""
    await asyncio.gather(*(proxy.call_tool("lookup", {"agent_id": a, "seconds": 0.3}, readonly=True) for a in (1, 2)))
    return json.loads(await proxy.call_tool("lookup_log", {}, readonly=True))


async def _log_of(module: str) -> list[list[object]]:
    handle = EnvRouterActor(EnvRouterConfig(modules=((module, {}),), router="react"))
    await handle.init(START, [1, 2])
    try:
        return await _two_lookups_then_log(InProcessEnvProxy(handle.ask_many))
    finally:
        await handle.close()


async def test_a_concurrency_safe_modules_calls_interleave_and_an_unsafe_ones_are_serialised(plugin_modules) -> None:
    safe = await _log_of("SlowPrivateSpace")
    assert [event for event, _ in safe] == ["start", "start", "end", "end"]  # the second began before the first ended
    unsafe = await _log_of("SlowSharedSpace")
    assert [event for event, _ in unsafe] == ["start", "end", "start", "end"]
    assert unsafe[0][1] == unsafe[1][1] and unsafe[2][1] == unsafe[3][1]  # each call ran whole before the next


@pytest.mark.parametrize(("module", "order"), [(SlowPrivateSpace, ["start", "start", "end", "end"]),
                                               (SlowSharedSpace, ["start", "end", "start", "end"])])
async def test_routed_asks_interleave_only_in_a_concurrency_safe_module(module: type[SlowSharedSpace], order: list[str]) -> None:
    space = module()
    decision = {"thought": "look", "action": {"tool": "lookup", "arguments": {"seconds": 0.2}}, "done": True}
    router = ReActRouter([space], ScriptedModel([decision, decision]))
    replies = await asyncio.gather(*(router.ask(EnvRequest("ask", a, "look it up")) for a in (1, 2)))
    assert [r.status for r in replies] == ["success", "success"]
    assert [event for event, _, _ in sorted(space.log, key=lambda e: e[2])] == order


def test_only_modules_that_keep_per_agent_state_declare_themselves_concurrency_safe() -> None:
    declared = {name for name in env_module_names() if resolve_env_module(name).is_concurrency_safe()}
    assert declared == SAFE
