"""Coalescer groups concurrent requests into few sends and gives each caller its own reply."""

from __future__ import annotations

import asyncio

import pytest

from engine.env.proxy import Coalescer
from engine.env.requests import EnvReply, EnvRequest


class FakeActor:
    """Stands in for ``EnvRouterActor.ask_many``: answers each request with its agent id."""

    def __init__(self) -> None:
        self.batches: list[list[EnvRequest]] = []

    async def ask_many(self, requests: list[EnvRequest]) -> list[EnvReply]:
        self.batches.append(list(requests))
        await asyncio.sleep(0)
        return [EnvReply(f"{r.op}:{r.agent_id}:{r.instruction}", "success") for r in requests]


async def test_concurrent_submits_share_few_calls_and_each_gets_its_own_reply() -> None:
    actor = FakeActor()
    coalescer = Coalescer(actor.ask_many, window_s=0.01)

    replies = await asyncio.gather(*(coalescer.submit(EnvRequest("ask", i, f"q{i}")) for i in range(100)))

    assert coalescer.calls <= 2
    assert len(actor.batches) == coalescer.calls
    assert sum(len(b) for b in actor.batches) == 100
    assert [r.answer for r in replies] == [f"ask:{i}:q{i}" for i in range(100)]


async def test_max_batch_flushes_without_waiting_for_the_window() -> None:
    actor = FakeActor()
    # A window far longer than the test: only max_batch can flush the first two groups promptly.
    coalescer = Coalescer(actor.ask_many, window_s=0.05, max_batch=10)

    replies = await asyncio.gather(*(coalescer.submit(EnvRequest("observe", i)) for i in range(25)))

    assert [len(b) for b in actor.batches] == [10, 10, 5]
    assert coalescer.calls == 3
    assert [r.answer for r in replies] == [f"observe:{i}:" for i in range(25)]


async def test_later_submits_start_a_new_group() -> None:
    actor = FakeActor()
    coalescer = Coalescer(actor.ask_many, window_s=0.001)

    first = await coalescer.submit(EnvRequest("ask", 1, "a"))
    second = await coalescer.submit(EnvRequest("ask", 2, "b"))

    assert (first.answer, second.answer) == ("ask:1:a", "ask:2:b")
    assert coalescer.calls == 2


async def test_an_exception_in_send_reaches_every_waiter() -> None:
    async def broken(requests: list[EnvRequest]) -> list[EnvReply]:
        raise ConnectionError("actor is gone")

    coalescer = Coalescer(broken, window_s=0.005)

    outcomes = await asyncio.gather(
        *(coalescer.submit(EnvRequest("ask", i)) for i in range(20)), return_exceptions=True
    )

    assert len(outcomes) == 20
    assert all(isinstance(o, ConnectionError) and str(o) == "actor is gone" for o in outcomes)
    assert coalescer.calls == 1


async def test_a_reply_list_of_the_wrong_length_fails_every_waiter_instead_of_hanging() -> None:
    async def short(requests: list[EnvRequest]) -> list[EnvReply]:
        return [EnvReply("only one", "success")]

    coalescer = Coalescer(short, window_s=0.005)

    outcomes = await asyncio.wait_for(
        asyncio.gather(*(coalescer.submit(EnvRequest("ask", i)) for i in range(3)), return_exceptions=True),
        timeout=60,  # only bounds the hang this is about
    )

    assert all(isinstance(o, ValueError) and "1 replies for 3 requests" in str(o) for o in outcomes), outcomes


async def test_a_failed_group_does_not_poison_the_next_one() -> None:
    calls = 0

    async def flaky(requests: list[EnvRequest]) -> list[EnvReply]:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("first call fails")
        return [EnvReply("ok", "success") for _ in requests]

    coalescer = Coalescer(flaky, window_s=0.001)
    with pytest.raises(RuntimeError, match="first call fails"):
        await coalescer.submit(EnvRequest("ask", 1))
    assert (await coalescer.submit(EnvRequest("ask", 1))).answer == "ok"


async def test_fail_env_actor_releases_requests_stuck_on_a_dead_actor_at_once() -> None:
    from engine.env.proxy import _COALESCERS, EnvRouterProxy, fail_env_actor
    from engine.errors import EnvUnavailableError

    never = asyncio.Event()

    async def hung(requests: list[EnvRequest]) -> list[EnvReply]:  # a connect that retries for seconds
        await never.wait()
        return []

    proxy = EnvRouterProxy(address="tcp://127.0.0.1:1", key="env-router-test-lost")
    _COALESCERS[(proxy.key, proxy.method, id(asyncio.get_running_loop()))] = Coalescer(hung, window_s=0.001)
    sent = [asyncio.create_task(proxy.observe(i)) for i in range(3)]
    await asyncio.sleep(0.01)  # flushed: now waiting on the hung send
    queued = asyncio.create_task(proxy.observe(9))  # not flushed yet
    await asyncio.sleep(0)

    assert await fail_env_actor(proxy.key, "its worker died") == 1
    for task in [*sent, queued]:
        with pytest.raises(EnvUnavailableError, match="was lost"):
            await asyncio.wait_for(task, 60)  # failed at once; the bound only turns a hang into a failure
    with pytest.raises(EnvUnavailableError, match="was lost"):
        await proxy.observe(5)  # later requests fail without waiting


async def test_direct_handles_send_to_serve_direct_and_close_with_their_proxy() -> None:
    from engine.env.proxy import EnvRouterProxy, InProcessEnvProxy, direct_requests
    from engine.env.scripted import ScriptedEnv
    from engine.errors import EnvUnavailableError

    sent: dict[str, list[EnvRequest]] = {"ask_many": [], "serve_direct": []}

    def method(name: str):
        async def send(requests: list[EnvRequest]) -> list[EnvReply]:
            sent[name] += requests
            return [EnvReply(f"{name} {r.agent_id}", "success") for r in requests]
        return send

    proxy = InProcessEnvProxy(method("ask_many"), serve_direct=method("serve_direct"))
    assert await direct_requests(proxy).observe(3) == "serve_direct 3"
    assert await proxy.observe(4) == "ask_many 4"
    assert [r.agent_id for r in sent["serve_direct"]] == [3] and [r.agent_id for r in sent["ask_many"]] == [4]
    proxy.close("the run ended")
    with pytest.raises(EnvUnavailableError):
        await direct_requests(proxy).observe(5)

    plain = InProcessEnvProxy(method("ask_many"))  # no direct path: the handle itself
    assert direct_requests(plain) is plain
    scripted = ScriptedEnv([])
    assert direct_requests(scripted) is scripted  # not a request transport
    remote = EnvRouterProxy(address="tcp://127.0.0.1:1", key="k")
    assert direct_requests(remote) == EnvRouterProxy(address="tcp://127.0.0.1:1", key="k", method="serve_direct")
