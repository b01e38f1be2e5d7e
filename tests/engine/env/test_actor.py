"""The env router inside a real Dask actor, reached through EnvRouterProxy from batch tasks."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest

from engine.env.actor import EnvRouterActor, EnvRouterConfig
from engine.env.control import EndTick
from engine.env.proxy import EnvRouterProxy, fail_env_actor
from engine.env.requests import EnvRequest
from engine.errors import EnvUnavailableError, ToolCallError

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
    config = EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react", run_dir=tmp_path)
    handle = await dask_client.submit(EnvRouterActor, config, actor=True)
    info = await handle.init(START, list(range(200)))
    return handle, EnvRouterProxy(address=handle._address, key=handle.key, env_skill_dirs=tuple(map(tuple, info["env_skill_dirs"])))


async def test_200_concurrent_calls_from_two_tasks_lose_no_update(dask_client, actor):
    handle, proxy = actor
    halves = [list(range(0, 100)), list(range(100, 200))]
    sent = await dask_client.gather([dask_client.submit(_send_all, proxy, half, pure=False) for half in halves])
    await handle.end_tick(EndTick(1, 600, START, 1, "run-1"))
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


def _break(method: str, agent_id: int) -> None:
    """In this worker process: make ``RouterBase.<method>`` raise for ``agent_id`` (an env bug, not a refusal)."""
    from engine.env.router_base import RouterBase

    original = getattr(RouterBase, method)

    async def broken(self, requested, *args, **kwargs):
        if requested == agent_id:
            raise RuntimeError(f"{method} broke for agent {requested}")
        return await original(self, requested, *args, **kwargs)

    broken.__wrapped__ = original
    setattr(RouterBase, method, broken)


def _mend(method: str) -> None:
    from engine.env.router_base import RouterBase

    current = getattr(RouterBase, method)
    setattr(RouterBase, method, getattr(current, "__wrapped__", current))


async def _observe_and_discard(proxy: EnvRouterProxy, agents: list[int]) -> dict[str, list[object]]:
    def shown(result: object) -> object:
        return f"{type(result).__name__}: {result}" if isinstance(result, BaseException) else result

    observed = await asyncio.gather(*(proxy.observe(a) for a in agents), return_exceptions=True)
    dropped = await asyncio.gather(*(proxy.discard_pending(a) for a in agents), return_exceptions=True)
    return {"observed": [shown(r) for r in observed], "dropped": [shown(r) for r in dropped]}


@pytest.fixture
async def broken_for_13(dask_client, actor):
    handle, proxy = actor
    where = (await handle.where())["address"]
    for method in ("observe", "discard_pending"):
        await dask_client.run(_break, method, 13, workers=[where])
    try:
        yield handle, proxy
    finally:
        for method in ("observe", "discard_pending"):
            await dask_client.run(_mend, method, workers=[where])


async def test_one_failing_request_answers_only_itself_in_its_coalescing_window(dask_client, broken_for_13):
    handle, proxy = broken_for_13
    agents = list(range(10, 20))
    batches_before = (await handle.usage())["batches"]

    result = await dask_client.submit(_observe_and_discard, proxy, agents, pure=False)
    batches = (await handle.usage())["batches"] - batches_before

    assert batches < len(agents)  # the ten observes did share windows with each other
    observed = dict(zip(agents, result["observed"], strict=True))
    assert observed[13].startswith("EnvError: the environment failed on this observe request (RuntimeError: observe broke for agent 13)")
    assert all(text == "Your inbox is empty." for agent, text in observed.items() if agent != 13), observed
    dropped = dict(zip(agents, result["dropped"], strict=True))
    assert dropped[13].startswith("EnvError: the environment failed on this discard request")  # never read as "0 dropped"
    assert all(value == 0 for agent, value in dropped.items() if agent != 13), dropped


async def test_ask_many_answers_a_raising_request_with_an_error_reply_and_the_rest_as_usual(broken_for_13):
    handle, _ = broken_for_13
    replies = await handle.ask_many([EnvRequest("observe", 12), EnvRequest("observe", 13), EnvRequest("observe", 14)])

    assert [r.status for r in replies] == ["success", "error", "success"]
    assert replies[1].answer == "error: the environment failed on this observe request (RuntimeError: observe broke for agent 13)"
    assert "Traceback" not in replies[1].answer


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
