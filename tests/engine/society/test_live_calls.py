"""Live counts without a cluster: the worker's throttle, the driver's fold with batch results, and the meter's listener."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine.llm.backends.scripted import ScriptedModel
from engine.llm.meter import CallRecord, Meter, MeteredModel, call_listener
from engine.run_progress import Phase, RunPhase, RunProgress
from engine.run_status import RunStatus
from engine.society.run.live_calls import LIVE_TOPIC, LiveCalls, LivePublisher, LiveTally, fold_live, listening, publishing


def record(input_tokens: int = 10, output_tokens: int = 2) -> CallRecord:
    return CallRecord("agent:1", "default", None, None, "sim/default:x", input_tokens, output_tokens, 1.0, "ok")


def message(scope: str | None, batch: int, calls: int, *, done: int = 0, tokens: int = 0) -> dict[str, Any]:
    return {"run": "r", "scope": scope, "batch": batch, "calls": calls, "input_tokens": tokens, "output_tokens": 0, "done": done}


# ---- the worker's throttle ---------------------------------------------------------------------------------
def test_a_tally_tells_the_first_call_at_once_then_at_most_once_per_interval() -> None:
    tally = LiveTally(interval_s=0.25)
    tally.add_call(record())
    assert tally.due_in(now=10.0) == 0.0
    tally.add_call(record())
    assert tally.due_in(now=10.05) is None  # a send is due already; it will carry this call too
    assert tally.message(10.1, run="r", scope="s", batch=3) == {
        "run": "r", "scope": "s", "batch": 3, "calls": 2, "input_tokens": 20, "output_tokens": 4, "done": 0}
    tally.add_call(record())
    tally.add_done(1)
    assert tally.due_in(now=10.2) == pytest.approx(0.15)  # not before 0.25 s after the last message
    assert tally.message(10.35, run="r", scope="s", batch=3)["calls"] == 3
    tally.add_done(2)
    assert tally.due_in(now=11.0) == 0.0
    assert tally.message(11.0, run="r", scope="s", batch=3)["done"] == 3


async def test_a_publisher_sends_the_first_call_on_the_loop_and_holds_the_rest_for_the_interval() -> None:
    sent: list[dict[str, Any]] = []
    first = asyncio.Event()

    def send(payload: dict[str, Any]) -> None:
        sent.append(payload)
        first.set()

    publisher = LivePublisher(send, run="r", scope="s", batch=1, interval_s=3600)
    publisher.call(record())
    assert sent == []  # not from inside the call: from the loop, after it
    await first.wait()
    publisher.call(record())
    publisher.finished(2)
    assert [(m["batch"], m["calls"], m["done"]) for m in sent] == [(1, 1, 0)]  # the rest waits for the interval
    publisher.close()  # the batch's result replaces its estimate: the held message is dropped


async def test_publishing_outside_a_worker_or_without_a_scope_is_silent() -> None:
    for scope in ("some-scope", None):
        with publishing(scope, run="r", batch=0) as live:
            assert call_listener.get() is None
            live.call(record())
            assert await live.counted(asyncio.sleep(0, result=5), lambda n: n) == 5
            assert live.tally.calls == live.tally.done == 0


async def test_a_meter_tells_the_listener_of_its_context_each_call_as_it_is_recorded() -> None:
    heard: list[CallRecord] = []
    meter = Meter()
    model = MeteredModel(ScriptedModel(["one", "two"]), meter, caller="agent:4")
    token = call_listener.set(heard.append)
    try:
        await model.complete([{"role": "user", "content": "hi"}])
        assert len(heard) == 1
        await model.complete([{"role": "user", "content": "again"}])
    finally:
        call_listener.reset(token)
    await MeteredModel(ScriptedModel(["three"]), meter, caller="agent:4").complete([{"role": "user", "content": "later"}])
    assert [r.caller for r in heard] == ["agent:4", "agent:4"] and meter.calls == 3


# ---- the driver's fold ---------------------------------------------------------------------------------------
def test_a_batch_result_replaces_its_live_estimate_and_later_messages_of_it_are_ignored() -> None:
    live = LiveCalls()
    scope = live.open()
    assert live.heard(message(scope, 0, 3, tokens=30)) and live.heard(message(scope, 1, 2))
    assert (live.calls, live.input_tokens) == (5, 30)
    live.finished(0)  # its 3 calls now count in the society's totals, from the result
    assert live.calls == 2
    assert not live.heard(message(scope, 0, 4))  # sent before the result, arrived after it
    assert live.calls == 2


def test_an_older_or_a_retried_attempts_lower_count_never_lowers_the_estimate() -> None:
    live = LiveCalls()
    scope = live.open()
    live.heard(message(scope, 0, 7, done=2))
    assert not live.heard(message(scope, 0, 3, done=1))  # a retried attempt starting over, or a late message
    assert (live.calls, live.done) == (7, 2)
    assert live.heard(message(scope, 0, 9, done=2))
    assert (live.calls, live.done) == (9, 2)


def test_messages_of_another_fan_out_count_nothing_and_closing_drops_every_estimate() -> None:
    live = LiveCalls()
    old = live.open()
    live.heard(message(old, 0, 4))
    new = live.open()  # the next tick (or a re-run of a failed one)
    assert live.calls == 0 and not live.heard(message(old, 1, 5))
    assert not live.heard({"scope": new, "batch": "zero", "calls": 1})  # not a batch number
    live.heard(message(new, 0, 1))
    live.close()
    assert live.calls == 0 and not live.heard(message(new, 0, 2))


def test_live_counts_fold_into_the_calls_and_into_the_phases_items() -> None:
    live = LiveCalls()
    scope = live.open()
    live.heard(message(scope, 0, 5, done=3, tokens=100))
    base = RunProgress(RunStatus.RUNNING, 1, 3, 10, 12, llm_calls=20, input_tokens=400)

    in_tick = fold_live(base.with_phase(Phase(RunPhase.TICK)), live)
    assert (in_tick.llm_calls, in_tick.input_tokens, in_tick.agent_steps_done) == (25, 500, 12)  # 13, never past the total

    asking = fold_live(base.with_phase(Phase(RunPhase.QUESTIONNAIRE, 4, 24)), live)
    assert (asking.agent_steps_done, asking.phase_done, asking.phase_total) == (10, 7, 24)

    live.close()
    assert fold_live(base, live) == base


class TopicClient:
    """The two calls of a distributed client that :func:`listening` makes, and the handler it was given."""

    status = "running"

    def __init__(self) -> None:
        self.handlers: dict[str, Any] = {}
        self.unsubscribed: list[str] = []

    def subscribe_topic(self, topic: str, handler: Any) -> None:
        self.handlers[topic] = handler

    def unsubscribe_topic(self, topic: str) -> None:
        self.unsubscribed.append(topic)


async def test_runs_on_one_client_share_its_subscription_and_hear_only_their_own_messages() -> None:
    client = TopicClient()
    first, second = LiveCalls(), LiveCalls()
    heard: list[str] = []
    async with listening(client, "run-a", first, lambda: heard.append("a")):
        async with listening(client, "run-b", second, lambda: heard.append("b")):
            deliver = client.handlers[LIVE_TOPIC]
            a, b = first.open(), second.open()
            deliver((0.0, {**message(a, 0, 2), "run": "run-a"}))
            deliver((0.0, {**message(b, 0, 5), "run": "run-b"}))
            deliver((0.0, {**message(b, 0, 5), "run": "run-c"}))  # another driver's run on the same scheduler
            deliver((0.0, "not a message of ours"))
            assert (first.calls, second.calls, heard) == (2, 5, ["a", "b"])
        assert client.unsubscribed == []  # run-a still listens
        deliver((0.0, {**message(b, 0, 9), "run": "run-b"}))
        assert second.calls == 0 and heard == ["a", "b"]  # run-b's fold was closed as it stopped listening
    assert client.unsubscribed == [LIVE_TOPIC] and first.calls == 0

