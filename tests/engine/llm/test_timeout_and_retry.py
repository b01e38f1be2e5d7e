"""Timeouts cancel hung requests; retries back off, honour Retry-After, and give up on permanent errors."""

from __future__ import annotations

import asyncio
import time

import pytest

from engine.errors import LLMCallError, LLMRateLimitError
from engine.llm.protocol import ChatResult
from engine.llm.retry import RetryingModel
from engine.llm.timeout import TimeoutModel

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
    started = time.perf_counter()
    assert (await model.complete([])).text == "ok"
    assert time.perf_counter() - started < 2
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
