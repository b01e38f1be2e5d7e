"""WindowedModel: a prompt past the model's context window is refused before it is sent, and recorded."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine.errors import LLMCallError
from engine.llm.meter import Meter, MeteredModel
from engine.llm.protocol import ChatResult
from engine.llm.wrappers.context_window import WindowedModel, estimate_tokens


class Counting:
    def __init__(self) -> None:
        self.sent = 0

    async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        self.sent += 1
        return ChatResult(text="ok", model="m", input_tokens=estimate_tokens(messages))


def test_a_prompt_over_the_window_is_refused_unsent_and_recorded_as_a_failed_call() -> None:
    inner = Counting()
    meter = Meter()
    model = MeteredModel(WindowedModel(inner, 300, max_tokens=100), meter, caller="agent:3")
    fits = [{"role": "user", "content": "x" * 800}]  # 200 tokens + 100 to answer
    asyncio.run(model.complete(fits))
    too_long = [{"role": "user", "content": "x" * 804}]  # 201 + 100
    with pytest.raises(LLMCallError, match="prompt is about 201 tokens and 100 to answer, over the model's context window of 300"):
        asyncio.run(model.complete(too_long))
    assert inner.sent == 1
    assert [r.status for r in meter.records] == ["ok", "error"] and "not sent" in (meter.records[1].error or "")
    assert meter.records[1].prompt_chars == 804


def test_max_tokens_of_the_call_counts_against_the_window() -> None:
    model = WindowedModel(Counting(), 300)
    asyncio.run(model.complete([{"role": "user", "content": "x" * 1200}]))
    with pytest.raises(LLMCallError):
        asyncio.run(model.complete([{"role": "user", "content": "x" * 1200}], max_tokens=1))
