"""The env router actor: concurrent requests, refusals and failing requests, as an object in this process
reached through the same coalescing proxy as on Dask (what only a real Dask actor has, a lost actor and a
released key, is in ``tests/engine/society/shells/test_on_dask.py``)."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from engine.env.actor import EnvRouterActor, EnvRouterConfig
from engine.env.control import EndTick
from engine.env.proxy import EnvRequests, InProcessEnvProxy
from engine.env.requests import EnvRequest
from engine.env.router_base import RouterBase
from engine.errors import ToolCallError

START = datetime(2026, 1, 1, 8)


async def _send_all(proxy: EnvRequests, senders: list[int]) -> int:
    await asyncio.gather(*(
        proxy.call_tool("send_message", {"agent_id": a, "to_agent_id": 0, "content": f"from {a}"}) for a in senders
    ))
    return len(senders)


async def _refused(proxy: EnvRequests) -> str:
    try:
        await proxy.call_tool("send_message", {"agent_id": 1, "to_agent_id": 999, "content": "x"})
    except ToolCallError as error:
        return str(error)
    return "accepted"


@pytest.fixture
async def router(tmp_path):
    """The router actor as an object here, started for 200 agents."""
    config = EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react", run_dir=tmp_path)
    actor = EnvRouterActor(config)
    info = await actor.init(START, list(range(200)))
    _SKILL_DIRS[id(actor)] = tuple(map(tuple, info["env_skill_dirs"]))
    try:
        yield actor
    finally:
        del _SKILL_DIRS[id(actor)]
        await actor.close()


_SKILL_DIRS: dict[int, tuple[tuple[str, str], ...]] = {}  #: each started router's skill directories, as init named them


def _proxy(actor: EnvRouterActor) -> InProcessEnvProxy:
    """A batch's handle on ``actor``: its own coalescer, as each batch task has its own on Dask."""
    return InProcessEnvProxy(actor.ask_many, env_skill_dirs=_SKILL_DIRS[id(actor)])


async def test_200_concurrent_calls_from_two_tasks_lose_no_update(router):
    halves = [list(range(0, 100)), list(range(100, 200))]
    sent = await asyncio.gather(*(_send_all(_proxy(router), half) for half in halves))
    await router.end_tick(EndTick(1, 600, START, 1, "run-1"))
    usage = await router.usage()

    inbox = await _proxy(router).observe(0)

    assert sum(sent) == 200
    assert inbox.startswith("Inbox (200 messages")
    assert usage["requests"] == 200
    assert usage["batches"] < 20  # coalesced: far fewer actor calls than requests


async def test_a_refused_direct_tool_call_raises_tool_call_error_in_the_task(router):
    message = await _refused(_proxy(router))
    assert "there is no agent 999" in message


def _broken(method: str, agent_id: int):  # noqa: ANN202
    """``RouterBase.<method>``, made to raise for ``agent_id`` (an env bug, not a refusal)."""
    original = getattr(RouterBase, method)

    async def broken(self, requested, *args, **kwargs):
        if requested == agent_id:
            raise RuntimeError(f"{method} broke for agent {requested}")
        return await original(self, requested, *args, **kwargs)

    return broken


async def _observe_and_discard(proxy: EnvRequests, agents: list[int]) -> dict[str, list[object]]:
    def shown(result: object) -> object:
        return f"{type(result).__name__}: {result}" if isinstance(result, BaseException) else result

    observed = await asyncio.gather(*(proxy.observe(a) for a in agents), return_exceptions=True)
    dropped = await asyncio.gather(*(proxy.discard_pending(a) for a in agents), return_exceptions=True)
    return {"observed": [shown(r) for r in observed], "dropped": [shown(r) for r in dropped]}


@pytest.fixture
def broken_for_13(router, monkeypatch):
    for method in ("observe", "discard_pending"):
        monkeypatch.setattr(RouterBase, method, _broken(method, 13))
    return router


async def test_one_failing_request_answers_only_itself_in_its_coalescing_window(broken_for_13):
    router = broken_for_13
    agents = list(range(10, 20))
    batches_before = (await router.usage())["batches"]

    result = await _observe_and_discard(_proxy(router), agents)
    batches = (await router.usage())["batches"] - batches_before

    assert batches < len(agents)  # the ten observes did share windows with each other
    observed = dict(zip(agents, result["observed"], strict=True))
    assert observed[13].startswith("EnvError: the environment failed on this observe request (RuntimeError: observe broke for agent 13)")
    assert all(text == "Your inbox is empty." for agent, text in observed.items() if agent != 13), observed
    dropped = dict(zip(agents, result["dropped"], strict=True))
    assert dropped[13].startswith("EnvError: the environment failed on this discard request")  # never read as "0 dropped"
    assert all(value == 0 for agent, value in dropped.items() if agent != 13), dropped


async def test_ask_many_answers_a_raising_request_with_an_error_reply_and_the_rest_as_usual(broken_for_13):
    router = broken_for_13
    replies = await router.ask_many([EnvRequest("observe", 12), EnvRequest("observe", 13), EnvRequest("observe", 14)])

    assert [r.status for r in replies] == ["success", "error", "success"]
    assert replies[1].answer == "error: the environment failed on this observe request (RuntimeError: observe broke for agent 13)"
    assert "Traceback" not in replies[1].answer


