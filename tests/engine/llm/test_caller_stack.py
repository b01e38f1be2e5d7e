"""The dispatcher's stacks: every wrapper forwards new parameters; a caller's stack meters, traces and budgets."""

from __future__ import annotations

import contextlib

import pytest

from engine.errors import BudgetExhaustedError, LLMCallError
from engine.llm.backends.scripted import ScriptedModel
from engine.llm.budget import Allowance, BudgetedModel, BudgetGate, Usage
from engine.llm.client import LimiterConfig, LLMClient
from engine.llm.dispatcher import caller_model, dispatcher_stats, get_chat_model
from engine.llm.meter import Meter, MeteredModel
from engine.llm.protocol import ChatResult
from engine.llm.wrappers.cache import CachedModel, ResponseCache
from engine.llm.wrappers.limited import LimitedModel
from engine.llm.wrappers.limiter import AdaptiveSemaphore
from engine.llm.wrappers.priced import PricedModel
from engine.llm.wrappers.retry import RetryingModel
from engine.llm.wrappers.single_flight import SingleFlightModel
from engine.llm.wrappers.timeout import TimeoutModel
from engine.llm.wrappers.traced import TracedModel
from engine.llm_spec import PriceSpec
from engine.society.datasets import LLM_CALLS
from engine.trace import TraceRecorder

HI = [{"role": "user", "content": "hi"}]


async def test_a_new_complete_parameter_reaches_the_backend_through_every_wrapper(tmp_path):
    backend = ScriptedModel(["a"])
    process = CachedModel(
        SingleFlightModel(PricedModel(RetryingModel(LimitedModel(TimeoutModel(backend), AdaptiveSemaphore(LimiterConfig()))),
                                      PriceSpec(input_usd_per_mtok=1, output_usd_per_mtok=2)), model="m", seed=1),
        ResponseCache(tmp_path), model="m", seed=1,
    )
    caller = MeteredModel(TracedModel(BudgetedModel(process, BudgetGate(Allowance())), TraceRecorder()), Meter(), caller="agent:1")

    await caller.complete(HI, prompt="p@1", tools=[{"type": "function"}], parallel_tool_calls=False)

    assert backend.requests == [{"messages": HI, "prompt": "p@1", "tools": [{"type": "function"}], "parallel_tool_calls": False}]


async def test_cache_and_single_flight_key_a_new_parameter_but_not_the_prompt_name(tmp_path):
    backend = ScriptedModel(["a", "b", "c"])
    model = CachedModel(SingleFlightModel(backend, model="m", seed=1), ResponseCache(tmp_path), model="m", seed=1)

    first = await model.complete(HI, prompt="one@1", parallel_tool_calls=False)
    again = await model.complete(HI, prompt="two@2", parallel_tool_calls=False)
    other = await model.complete(HI, prompt="one@1", parallel_tool_calls=True)

    assert (first.text, again.text, again.cached, other.text) == ("a", "a", True, "b")
    assert len(backend.requests) == 2


async def test_a_callers_stack_records_spans_and_calls_and_stops_at_its_allowance():
    client = LLMClient(role="coder", model="sim/default", seed=3)
    meter, trace, gate = Meter(), TraceRecorder(), BudgetGate(Allowance(calls=1))
    model = caller_model(client, meter, caller="router", trace=trace, budget=gate)

    await model.complete(HI, prompt="route@abc")
    with pytest.raises(BudgetExhaustedError):
        await model.complete(HI, prompt="route@abc")

    spans = trace.drain()
    assert [(s.name, s.status, s.attrs["prompt"]) for s in spans] == [("llm.completion", "ok", "route@abc"),
                                                                       ("llm.completion", "error", "route@abc")]
    assert [(r.caller, r.role, r.prompt_name, r.status) for r in meter.records] == [("router", "coder", "route", "ok")]
    assert (gate.used.calls, gate.refused) == (1, 1)

    gate.renew(Allowance(calls=1))  # the next transaction's share
    await model.complete([{"role": "user", "content": "again"}])
    assert (gate.used.calls, gate.refused, len(meter.records)) == (1, 0, 2)


async def test_callers_stacks_share_one_process_stack():
    client = LLMClient(model="sim/default:shared-stack", seed=4)
    get_chat_model(client)
    builds = dispatcher_stats()["builds"]
    for caller in ("agent:1", "agent:2", "router", "helper"):
        await caller_model(client, Meter(), caller=caller).complete(HI)
    assert dispatcher_stats()["builds"] == builds


class _Echo:
    """A model that answers with the last message, or fails quoting it."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    async def complete(self, messages, **kwargs):  # noqa: ANN001, ANN003, ANN201
        if self.fail:
            raise LLMCallError(f"refused: {messages[-1]['content']}")
        return ChatResult(text=f"you said {messages[-1]['content']}", model="echo")


async def test_a_callers_records_keep_the_messages_and_reply_with_the_key_scrubbed(monkeypatch):
    key = "sk-scrub-me-0042"
    monkeypatch.setenv("POLIS_TEST_KEY", key)
    client = LLMClient(role="default", model="sim/default", seed=1, api_key_env="POLIS_TEST_KEY")
    meter = Meter()
    said = [{"role": "system", "content": "be brief"}, {"role": "user", "content": f"my key is {key}"}]
    await caller_model(client, meter, caller="agent:4").complete(said, prompt="p@1")

    (record,) = meter.records
    assert record.messages == [said[0], {"role": "user", "content": "my key is ***"}]
    assert record.reply and key not in record.reply
    # The row is exactly the llm_calls columns the record owns (run, step and call_id come from where it is written): no text.
    assert set(record.as_row()) == {c.name for c in LLM_CALLS.columns} - {"run", "step", "call_id"}

    for fail in (False, True):
        meter = Meter()
        model = MeteredModel(_Echo(fail=fail), meter, caller="router", secret=key)
        with pytest.raises(LLMCallError) if fail else contextlib.nullcontext():
            await model.complete(said)
        (record,) = meter.records
        assert key not in repr([record.messages, record.reply, record.error])
        assert "***" in (record.error if fail else record.reply)


async def test_a_clients_spec_price_is_what_its_calls_cost(tmp_path):
    price = PriceSpec(input_usd_per_mtok=3.0, output_usd_per_mtok=15.0)
    client = LLMClient(model="sim/default", seed=4, price=price, cache_dir=str(tmp_path))
    meter = Meter()
    model = caller_model(client, meter, caller="agent:1")

    first = await model.complete([{"role": "user", "content": "price me"}])
    again = await model.complete([{"role": "user", "content": "price me"}])

    assert first.cost_usd == pytest.approx((first.input_tokens * 3.0 + first.output_tokens * 15.0) / 1e6) and first.cost_usd > 0
    assert again.cached and meter.provider_calls == 1
    assert Usage.of_calls(r.as_row() for r in meter.records).cost_usd == pytest.approx(first.cost_usd)  # what budgets count
    assert LLMClient(model="sim/default").price is None  # unpriced: litellm's map (None for the sim)
