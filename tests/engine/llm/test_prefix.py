"""engine.llm.prefix and the meter's prompt tracking: the leading messages two prompts share, per template."""

from __future__ import annotations

import asyncio
from typing import Any

from engine.llm.meter import Meter, MeteredModel
from engine.llm.prefix import prompt_print, shared_prefix
from engine.llm.protocol import ChatResult


class Echo:
    async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        return ChatResult(text="ok", input_tokens=10, output_tokens=1, model="echo")


def test_the_shared_prefix_is_the_leading_messages_alike() -> None:
    one = prompt_print([{"role": "system", "content": "fixed"}, {"role": "user", "content": "tick 1"}])
    two = prompt_print([{"role": "system", "content": "fixed"}, {"role": "user", "content": "tick 2"}])
    assert shared_prefix(one, two) == 5 and sum(n for _, n in two) == 11
    assert shared_prefix(None, two) is None
    other = prompt_print([{"role": "user", "content": "fixed"}, {"role": "user", "content": "tick 2"}])
    assert shared_prefix(one, other) == 0  # the role counts too
    longer = prompt_print([{"role": "system", "content": "fixed"}, {"role": "user", "content": "tick 1"},
                           {"role": "assistant", "content": "done"}])
    assert shared_prefix(one, longer) == 11  # the next ReAct turn repeats the whole earlier prompt


def test_a_tracking_meter_compares_each_call_with_the_last_of_its_template() -> None:
    meter = Meter(track_prompts=True)
    model = MeteredModel(Echo(), meter, caller="agent:1")
    step = [{"role": "system", "content": "who I am"}, {"role": "user", "content": "now"}]

    async def calls() -> None:
        await model.complete(step, prompt="person.step@abc")
        await model.complete([{"role": "user", "content": "compact this"}], prompt="memory.compact@def")
        await model.complete([step[0], {"role": "user", "content": "later"}], prompt="person.step@abc")

    asyncio.run(calls())
    rows = [r.as_row() for r in meter.records]
    assert [(r["prompt_chars"], r["prefix_chars"]) for r in rows] == [(11, None), (12, None), (13, 8)]
    assert set(meter.last_prompts) == {"person.step", "memory.compact"}
    untracked = Meter()
    asyncio.run(MeteredModel(Echo(), untracked, caller="router").complete(step))
    assert untracked.records[0].prefix_chars is None and untracked.records[0].prompt_chars == 11
