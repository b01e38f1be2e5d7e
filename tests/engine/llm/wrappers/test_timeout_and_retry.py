"""Timeouts cancel hung requests; retries back off, honour Retry-After, and give up on permanent errors."""

from __future__ import annotations

import asyncio
import gc
import time

import pytest

from engine.errors import LLMCallError, LLMRateLimitError
from engine.llm.protocol import ChatResult
from engine.llm.wrappers.retry import RetryingModel
from engine.llm.wrappers.timeout import TimeoutModel

OK = ChatResult(text="ok", model="m")


class Script:
    """Fails with the given errors in order, then answers; 'hang' sleeps forever."""

    def __init__(self, *outcomes) -> None:
        self.outcomes = list(outcomes)
        self.calls = 0
        self.cancelled = 0

    async def complete(self, messages, **kwargs):
        self.calls += 1
        outcome = self.outcomes.pop(0) if self.outcomes else OK
        if outcome == "hang":
            try:
                await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self.cancelled += 1
                raise
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


async def test_a_hung_request_is_cancelled_and_retried():
    inner = Script("hang")
    model = RetryingModel(TimeoutModel(inner, timeout=0.1), base_delay=0.01)
    # The hang is an hour: an answer at all means it was cut; the outer bound only turns a hang into a failure.
    assert (await asyncio.wait_for(model.complete([]), 120)).text == "ok"
    assert inner.calls == 2 and inner.cancelled == 1


async def test_retry_after_is_honoured():
    inner = Script(LLMRateLimitError("slow down", status=429, retry_after=0.3))
    started = time.perf_counter()
    await RetryingModel(inner, base_delay=0.01).complete([])
    assert time.perf_counter() - started >= 0.3
    assert inner.calls == 2


async def test_permanent_errors_are_not_retried_and_transient_ones_give_up_after_max_attempts():
    bad_request = Script(LLMCallError("bad request", status=400))
    with pytest.raises(LLMCallError, match="bad request"):
        await RetryingModel(bad_request, base_delay=0.01).complete([])
    assert bad_request.calls == 1

    down = Script(*[LLMCallError("down", status=503)] * 5)
    with pytest.raises(LLMCallError, match="down"):
        await RetryingModel(down, max_attempts=3, base_delay=0.01).complete([])
    assert down.calls == 3


async def test_a_call_under_a_timeout_runs_in_the_callers_task():
    seen: list[int] = []

    class Counting:
        async def complete(self, messages, **kwargs):
            seen.append(len(asyncio.all_tasks()))
            return OK

    await TimeoutModel(Counting(), timeout=5).complete([])
    assert seen == [1]  # no task of its own per call (asyncio.wait_for made one)


async def test_a_retried_error_is_freed_before_the_backoff_sleep():
    class Sleepy(LLMRateLimitError):
        pass

    class BusyOnce:
        calls = 0

        async def complete(self, messages, **kwargs):
            self.calls += 1
            if self.calls == 1:  # raised unbound: no local of this frame holds it (Script's would)
                raise Sleepy("busy", status=429, retry_after=0.2)
            return OK

    busy = BusyOnce()
    model = RetryingModel(busy, base_delay=0.01)
    gc.disable()  # what stays alive during the sleep must be freed by reference counting alone
    try:
        call = asyncio.ensure_future(model.complete([]))
        while busy.calls == 0:  # the step that makes the first call raises, and ends in the backoff sleep
            await asyncio.sleep(0)
        lingering = [o for o in gc.get_objects() if isinstance(o, Sleepy)]  # looked at during that sleep
        assert (await call).text == "ok"
    finally:
        gc.enable()
    assert lingering == []  # the error's traceback held the retrying frame: a cycle until a collection
