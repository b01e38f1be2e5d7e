"""Response cache and single-flight wrappers."""

from __future__ import annotations

import asyncio
import gc
import json

import pytest

from engine.errors import LLMCallError
from engine.llm.protocol import ChatResult
from engine.llm.request_key import request_key
from engine.llm.wrappers.cache import CachedModel, ResponseCache
from engine.llm.wrappers.single_flight import SingleFlightModel


class CountingModel:
    """A slow fake provider that counts calls; with a ``gate``, each call lasts until the gate is set."""

    def __init__(self, delay: float = 0.05, fail: bool = False, gate: asyncio.Event | None = None) -> None:
        self.calls = 0
        self.delay = delay
        self.fail = fail
        self.gate = gate

    async def complete(self, messages, **kwargs) -> ChatResult:
        self.calls += 1
        await (self.gate.wait() if self.gate is not None else asyncio.sleep(self.delay))
        if self.fail:
            raise LLMCallError("provider down", status=500)
        return ChatResult(text=f"answer to {messages[-1]['content']}", model="m", input_tokens=3, output_tokens=2)


MSG = [{"role": "user", "content": "q"}]


async def test_single_flight_collapses_50_identical_concurrent_requests_into_one_call():
    provider = CountingModel()
    model = SingleFlightModel(provider, model="m", seed=1)

    results = await asyncio.gather(*(model.complete(MSG) for _ in range(50)))

    assert provider.calls == 1
    assert {r.text for r in results} == {"answer to q"}
    assert model.shared == 49


async def test_single_flight_keeps_different_requests_apart_and_forgets_finished_ones():
    provider = CountingModel(delay=0.01)
    model = SingleFlightModel(provider, model="m", seed=1)
    await asyncio.gather(model.complete(MSG), model.complete([{"role": "user", "content": "other"}]))
    await model.complete(MSG)
    assert provider.calls == 3


async def test_single_flight_shares_a_failure_with_every_waiter():
    model = SingleFlightModel(CountingModel(fail=True), model="m", seed=1)
    results = await asyncio.gather(*(model.complete(MSG) for _ in range(5)), return_exceptions=True)
    assert all(isinstance(r, LLMCallError) for r in results)


async def test_a_cancelled_caller_does_not_cancel_the_shared_call():
    # The call lasts until the test lets it end (not 50 ms, which a busy machine can spend before the second
    # caller comes, which then finds no call to share).
    provider = CountingModel(gate=asyncio.Event())
    model = SingleFlightModel(provider, model="m", seed=1)
    first = asyncio.ensure_future(model.complete(MSG))
    while provider.calls == 0:
        await asyncio.sleep(0)
    second = asyncio.ensure_future(model.complete(MSG))
    await asyncio.sleep(0)
    first.cancel()
    await asyncio.sleep(0)
    provider.gate.set()
    assert (await second).text == "answer to q"
    assert provider.calls == 1


async def test_cache_serves_a_rerun_without_calling_the_provider(tmp_path):
    provider = CountingModel(delay=0)
    cold = CachedModel(provider, ResponseCache(tmp_path), model="m", seed=7)
    first = await cold.complete(MSG, response_format={"type": "json_object"})
    assert cold.cache.flush() == 1  # what a batch task does before it returns

    warm = CachedModel(provider, ResponseCache(tmp_path), model="m", seed=7)  # e.g. another process
    again = await warm.complete(MSG, response_format={"type": "json_object"})

    assert provider.calls == 1
    assert again.cached and not first.cached
    assert (again.text, again.input_tokens, again.output_tokens) == (first.text, first.input_tokens, first.output_tokens)


@pytest.mark.parametrize("change", ["seed", "model", "format", "options"])
async def test_cache_key_covers_model_request_seed_and_options(tmp_path, change):
    provider = CountingModel(delay=0)
    base = {"model": "m", "seed": 7, "options": {"temperature": 0}}
    first = CachedModel(provider, ResponseCache(tmp_path), **base)
    await first.complete(MSG)
    first.cache.flush()
    other = dict(base)
    fmt = None
    if change == "seed":
        other["seed"] = 8
    elif change == "model":
        other["model"] = "m2"
    elif change == "options":
        other["options"] = {"temperature": 1}
    else:
        fmt = {"type": "json_object"}
    await CachedModel(provider, ResponseCache(tmp_path), **other).complete(MSG, response_format=fmt)
    assert provider.calls == 2


async def test_a_failed_call_is_not_cached(tmp_path):
    provider = CountingModel(delay=0, fail=True)
    model = CachedModel(provider, ResponseCache(tmp_path), model="m", seed=1)
    for _ in range(2):
        with pytest.raises(LLMCallError):
            await model.complete(MSG)
    assert provider.calls == 2
    assert model.cache.flush() == 0 and not list(tmp_path.rglob("*"))


async def test_a_cached_answer_keeps_the_served_model_and_fingerprint_the_provider_returned(tmp_path):
    class Snapshot(CountingModel):
        async def complete(self, messages, **kwargs) -> ChatResult:
            self.calls += 1
            return ChatResult(text="a", model="m", served_model="m-2026-01", system_fingerprint="fp_1")

    provider = Snapshot()
    cold = CachedModel(provider, ResponseCache(tmp_path), model="m", seed=1)
    first = await cold.complete(MSG)
    cold.cache.flush()
    again = await CachedModel(provider, ResponseCache(tmp_path), model="m", seed=1).complete(MSG)

    assert provider.calls == 1 and again.cached and not first.cached
    assert (again.served_model, again.system_fingerprint) == ("m-2026-01", "fp_1")


async def test_a_failure_whose_callers_were_all_cancelled_is_not_logged_as_never_retrieved():
    loop = asyncio.get_running_loop()
    reported: list[dict] = []
    loop.set_exception_handler(lambda _, context: reported.append(context))
    model = SingleFlightModel(CountingModel(delay=0.02, fail=True), model="m", seed=1)
    caller = asyncio.ensure_future(model.complete(MSG))
    await asyncio.sleep(0.005)
    caller.cancel()
    await asyncio.sleep(0.05)  # the shared call fails with nobody left awaiting it
    del caller
    gc.collect()  # a task's unretrieved exception is reported when the task is freed
    assert not [context for context in reported if "never retrieved" in context.get("message", "")]


async def test_answers_go_into_one_pack_per_flush_not_a_file_per_call(tmp_path):
    provider = CountingModel(delay=0)
    cold = CachedModel(provider, ResponseCache(tmp_path), model="m", seed=3)
    for i in range(300):
        await cold.complete([{"role": "user", "content": f"q{i}"}])
    assert cold.cache.get(request_key("m", 3, [{"role": "user", "content": "q7"}])) is not None  # still in memory
    assert cold.cache.flush() == 300
    assert [p.suffix for p in tmp_path.iterdir()] == [".llmpack"]
    warm = CachedModel(provider, ResponseCache(tmp_path), model="m", seed=3)
    answers = [await warm.complete([{"role": "user", "content": f"q{i}"}]) for i in range(300)]
    assert provider.calls == 300 and all(a.cached for a in answers) and warm.cache.hits == 300


async def test_a_corrupt_cache_pack_is_a_miss_never_an_invented_answer(tmp_path):
    provider = CountingModel(delay=0)
    cold = CachedModel(provider, ResponseCache(tmp_path), model="m", seed=3)
    await cold.complete(MSG)
    cold.cache.flush()
    (pack,) = tmp_path.iterdir()
    data = bytearray(pack.read_bytes())
    data[12] ^= 0xFF  # inside the only answer's frame
    pack.write_bytes(bytes(data))
    again = await CachedModel(provider, ResponseCache(tmp_path), model="m", seed=3).complete(MSG)
    assert provider.calls == 2 and not again.cached


async def test_a_cache_written_one_file_per_answer_is_still_read(tmp_path):
    key = request_key("m", 1, MSG)
    legacy = tmp_path / key[:2] / f"{key}.json"
    legacy.parent.mkdir()
    legacy.write_text(json.dumps({"text": "old answer", "model": "m"}))
    provider = CountingModel(delay=0)
    hit = await CachedModel(provider, ResponseCache(tmp_path), model="m", seed=1).complete(MSG)
    assert provider.calls == 0 and hit.cached and hit.text == "old answer"
