"""Budget gate: reserve-then-charge, so concurrent callers cannot overshoot the allowance."""

from __future__ import annotations

import asyncio

import pytest

from engine.errors import BudgetExhaustedError, LLMCallError
from engine.llm.budget import Allowance, BudgetedModel, BudgetGate, Usage
from engine.llm.protocol import ChatResult
from engine.society.society import split_allowance


class Provider:
    def __init__(self, fail: bool = False, cached: bool = False) -> None:
        self.calls = 0
        self.fail = fail
        self.cached = cached

    async def complete(self, messages, **kwargs):
        self.calls += 1
        await asyncio.sleep(0.01)
        if self.fail:
            raise LLMCallError("down", status=500)
        return ChatResult(text="x", model="m", input_tokens=10, output_tokens=5, cached=self.cached, cost_usd=0.01)


async def test_concurrent_callers_never_exceed_the_call_allowance():
    provider = Provider()
    model = BudgetedModel(provider, BudgetGate(Allowance(calls=7)))
    results = await asyncio.gather(*(model.complete([]) for _ in range(20)), return_exceptions=True)
    assert provider.calls == 7
    assert sum(isinstance(r, BudgetExhaustedError) for r in results) == 13


async def test_failed_calls_give_their_reservation_back():
    gate = BudgetGate(Allowance(calls=2))
    with pytest.raises(LLMCallError):
        await BudgetedModel(Provider(fail=True), gate).complete([])
    assert gate.used.calls == 0 and gate.in_flight == 0
    await BudgetedModel(Provider(), gate).complete([])
    assert gate.used.calls == 1


@pytest.mark.parametrize(("allowance", "message"), [
    (Allowance(tokens=30), "token budget"), (Allowance(cost_usd=0.02), "cost budget"),
])
async def test_token_and_cost_allowances_stop_further_calls(allowance, message):
    model = BudgetedModel(Provider(), BudgetGate(allowance))
    await model.complete([])
    await model.complete([])
    with pytest.raises(BudgetExhaustedError, match=message):
        await model.complete([])


async def test_cached_answers_cost_nothing():
    gate = BudgetGate(Allowance(calls=1))
    model = BudgetedModel(Provider(cached=True), gate)
    for _ in range(3):
        await model.complete([])
    assert gate.used.calls == 0


def test_split_allowance_shares_what_remains():
    parts = split_allowance(Allowance(calls=11, tokens=None, cost_usd=1.0), Usage(calls=1, cost_usd=0.4), 3)
    assert [p.calls for p in parts] == [4, 3, 3]
    assert all(p.tokens is None for p in parts)
    assert sum(p.cost_usd for p in parts) == pytest.approx(0.6)
    assert [p.calls for p in split_allowance(Allowance(calls=5), Usage(calls=9), 2)] == [0, 0]
