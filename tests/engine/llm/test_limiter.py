"""The AIMD limiter: its sans-IO core fed events, its asyncio shell, and LimitedModel over real HTTP."""

from __future__ import annotations

import asyncio
from collections import deque

import httpx
import pytest

from engine.llm.client import LimiterConfig, LLMClient
from engine.llm.dispatcher import get_chat_model, limiter_for
from engine.llm.limited import LimitedModel
from engine.llm.limiter import AdaptiveLimit, AdaptiveSemaphore
from engine.llm.litellm_backend import LiteLLMChatModel
from engine.llm.retry import RetryingModel
from engine.llm.sim import SimFaults, SimLLM
from engine.llm.sim.background import serving


class Driver:
    """Feeds an ``AdaptiveLimit`` like a process with ``demand`` callers that always want a slot."""

    def __init__(self, limit: AdaptiveLimit, demand: int) -> None:
        self.limit = limit
        self.demand = demand
        self.flying: deque[int] = deque()
        self.now = 0.0

    def fill(self) -> None:
        while len(self.flying) < self.demand and self.limit.has_room:
            self.flying.append(self.limit.issue())

    def run(self, completions: int, *, latency_s: float = 0.1, rate_limited: bool = False) -> None:
        """Complete the oldest call ``completions`` times, refilling after each."""
        for _ in range(completions):
            self.fill()
            self.now += 0.001
            self.limit.complete(self.flying.popleft(), now=self.now, latency_s=latency_s, rate_limited=rate_limited)
        self.fill()


def saturated(config: LimiterConfig | None = None, demand: int = 10_000) -> Driver:
    return Driver(AdaptiveLimit(config), demand)


def after_one_decrease(config: LimiterConfig | None = None) -> Driver:
    """A busy limiter past slow start: 16 healthy calls taught it the baseline, then one 429 halved it."""
    driver = saturated(config)
    driver.run(1)
    driver.run(1, rate_limited=True)
    assert driver.limit.decreases == 1
    # drain the calls issued before the decrease; they neither grow nor shrink the limit
    limit = driver.limit.limit
    driver.run(len(driver.flying))
    assert driver.limit.limit == limit
    return driver


def test_limit_starts_at_the_configured_concurrency():
    assert AdaptiveLimit().limit == 16
    assert AdaptiveLimit(LimiterConfig(concurrency=3)).limit == 3


def test_limit_grows_when_healthy_and_in_use():
    driver = saturated()
    driver.run(16)  # slow start: one per healthy completion while the limit is full
    assert driver.limit.limit == 32
    driver.run(200)
    assert driver.limit.limit > 200
    assert driver.limit.history[0] == (0.0, 16)
    assert [limit for _, limit in driver.limit.history] == sorted(limit for _, limit in driver.limit.history)


def test_limit_grows_additively_after_the_first_decrease():
    driver = after_one_decrease()
    limit = driver.limit.limit
    driver.run(limit - 1)
    assert driver.limit.limit == limit
    driver.run(1)  # a full window of `limit` healthy completions
    assert driver.limit.limit == limit + 1


def test_idle_limit_does_not_grow():
    for demand in (1, 8, 15):
        driver = saturated(demand=demand)
        driver.run(2_000)
        assert driver.limit.limit == 16
        assert driver.limit.in_flight == demand


def test_idle_limit_does_not_grow_after_a_decrease_either():
    driver = after_one_decrease()
    driver.demand = driver.limit.limit - 1
    driver.run(50)  # the window in which in-flight last reached the limit ends
    limit = driver.limit.limit
    driver.run(1_000)
    assert driver.limit.limit == limit


def test_burst_of_429s_halves_once():
    driver = saturated()
    driver.fill()
    assert driver.limit.in_flight == 16
    driver.run(16, rate_limited=True)  # every call issued before the first 429 came back 429
    assert driver.limit.limit == 8
    assert driver.limit.decreases == 1


def test_429_from_a_call_issued_after_the_decrease_halves_again():
    driver = saturated()
    driver.run(16, rate_limited=True)
    assert driver.limit.limit == 8
    driver.run(8, rate_limited=True)  # the calls issued after the first decrease
    assert driver.limit.limit == 4


def test_limit_recovers_after_429s_stop():
    driver = saturated()
    driver.run(64, rate_limited=True)
    low = driver.limit.limit
    assert low < 16
    driver.run(2_000)
    assert driver.limit.limit > 16
    assert driver.limit.history[-1][1] == driver.limit.limit


def test_latency_above_factor_times_baseline_halves():
    driver = after_one_decrease()
    limit = driver.limit.limit
    driver.run(3, latency_s=0.3)  # under 4 x the 0.1 s baseline
    assert driver.limit.limit == limit
    driver.run(1, latency_s=1.0)
    assert driver.limit.limit == limit // 2


def test_latency_factor_is_configurable():
    driver = after_one_decrease(LimiterConfig(latency_degrade_factor=2.0))
    limit = driver.limit.limit
    driver.run(1, latency_s=0.25)
    assert driver.limit.limit == limit // 2


def test_no_relative_judgement_before_a_baseline():
    limit = AdaptiveLimit()
    first, second = limit.issue(), limit.issue()
    assert limit.complete(first, now=0, latency_s=0.01, rate_limited=False) == "healthy"
    assert limit.complete(second, now=0, latency_s=5.0, rate_limited=False) == "healthy"
    assert limit.limit == 16


def test_absolute_slow_threshold_halves():
    limit = AdaptiveLimit(LimiterConfig(slow_latency_ms=1_000))
    ticket = limit.issue()
    assert limit.complete(ticket, now=1.0, latency_s=1.2, rate_limited=False) == "slow"
    assert limit.limit == 8
    assert limit.history == [(0.0, 16), (1.0, 8)]


def test_slower_provider_becomes_the_new_baseline():
    driver = after_one_decrease()
    driver.run(500, latency_s=1.0)  # 10 x slower for good
    assert driver.limit.baseline_s == pytest.approx(1.0, rel=0.05)
    low = driver.limit.limit
    driver.run(500, latency_s=1.0)
    assert driver.limit.limit > low


def test_limit_floor_is_one():
    driver = saturated()
    driver.run(200, rate_limited=True)
    assert driver.limit.limit == 1
    assert driver.limit.in_flight == 1
    driver.run(1)
    assert driver.limit.limit == 2


def test_abandoned_call_frees_its_place_and_teaches_nothing():
    limit = AdaptiveLimit(LimiterConfig(concurrency=1))
    limit.abandon(limit.issue())
    assert (limit.limit, limit.in_flight, limit.decreases) == (1, 0, 0)


async def test_semaphore_queues_beyond_the_limit_first_in_first_out():
    semaphore = AdaptiveSemaphore(LimiterConfig(concurrency=2))
    order: list[int] = []
    release = asyncio.Event()

    async def call(i: int) -> None:
        async with semaphore.slot():
            order.append(i)
            await release.wait()

    tasks = [asyncio.create_task(call(i)) for i in range(5)]
    await asyncio.sleep(0.001)
    assert (order, semaphore.in_flight, semaphore.waiting) == ([0, 1], 2, 3)
    release.set()
    await asyncio.gather(*tasks)
    assert order == [0, 1, 2, 3, 4]
    assert (semaphore.in_flight, semaphore.waiting, semaphore.limit) == (0, 0, 2)


async def test_semaphore_cancelled_waiter_leaves_the_queue():
    semaphore = AdaptiveSemaphore(LimiterConfig(concurrency=1))
    held = semaphore.slot()
    await held.__aenter__()
    waiter = asyncio.create_task(semaphore.slot().__aenter__())
    await asyncio.sleep(0.001)
    assert semaphore.waiting == 1
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    await held.__aexit__(None, None, None)
    assert (semaphore.in_flight, semaphore.waiting) == (0, 0)


async def test_semaphore_growth_wakes_waiters_and_records_latency():
    semaphore = AdaptiveSemaphore(LimiterConfig(concurrency=1))
    entered = 0
    gate = asyncio.Event()

    async def call() -> None:
        nonlocal entered
        async with semaphore.slot() as slot:
            entered += 1
            await gate.wait()
            slot.record(0.01, rate_limited=False)

    tasks = [asyncio.create_task(call()) for _ in range(3)]
    await asyncio.sleep(0.001)
    assert entered == 1
    gate.set()
    await asyncio.gather(*tasks)
    assert semaphore.limit > 1  # slow start: each healthy completion of a full limit added one
    assert len(semaphore.history) > 1


async def test_limited_model_backs_off_on_429s_over_real_http():
    faults = SimFaults(capacity=8, latency_ms=50, retry_after_s=0.05)
    with serving(SimLLM(), faults) as url:
        client = LLMClient(model="openai/sim", base_url=url + "/v1")
        limiter = AdaptiveSemaphore(LimiterConfig(concurrency=16))
        model = RetryingModel(LimitedModel(LiteLLMChatModel(client), limiter), max_attempts=30, base_delay=0.01, max_delay=0.2)
        calls = 48
        results = await asyncio.gather(*(model.complete([{"role": "user", "content": f"caller {i}"}]) for i in range(calls)))
        async with httpx.AsyncClient() as http:
            stats = (await http.get(url + "/stats")).json()

    assert all(result.text for result in results)
    assert stats["outcomes"]["ok"] == calls
    assert stats["outcomes"]["rejected_capacity"] > 0  # 16 > 8: the server pushed back
    assert stats["max_in_flight"] <= 8
    assert limiter.core.decreases >= 1
    assert min(limit for _, limit in limiter.history) <= 8
    assert limiter.in_flight == 0


def test_dispatcher_keeps_one_limiter_per_client_and_none_for_the_in_process_sim():
    client = LLMClient(model="openai/limited", base_url="http://127.0.0.1:9/v1", limits=LimiterConfig(concurrency=5))
    get_chat_model(client)
    limiter = limiter_for(client)
    assert isinstance(limiter, AdaptiveSemaphore)
    assert limiter.limit == 5
    get_chat_model(client)
    assert limiter_for(client) is limiter

    sim = LLMClient(model="sim/unlimited")
    get_chat_model(sim)
    assert limiter_for(sim) is None
