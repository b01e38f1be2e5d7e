"""The AIMD limiter: its sans-IO core against simulated servers, its asyncio shell, and LimitedModel."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import httpx
import pytest

from engine.errors import LLMRateLimitError
from engine.llm.backends.litellm_backend import LiteLLMChatModel
from engine.llm.client import LimiterConfig, LLMClient
from engine.llm.dispatcher import get_chat_model, limiter_for
from engine.llm.protocol import ChatResult
from engine.llm.sim import SimFaults, SimLLM
from engine.llm.sim.background import serving
from engine.llm.wrappers.aimd import Cohort
from engine.llm.wrappers.limited import LimitedModel
from engine.llm.wrappers.limiter import AdaptiveLimit, AdaptiveSemaphore
from engine.llm.wrappers.retry import RetryingModel
from tests.engine.llm.wrappers.limiter_world import CapacityServer, QueueingServer, World, retrying_model

SEEDS = [0, 1, 2]


def settled(world: World, *, warm_s: float = 5.0, seconds: float = 20.0) -> tuple[float, float]:
    """Run ``warm_s``, then ``seconds`` more: the time-averaged limit and answers/s over the latter."""
    world.run(warm_s)
    since, ok = world.now, world.ok
    world.run(seconds)
    return world.mean_limit(since), (world.ok - ok) / seconds


def test_limit_starts_at_the_configured_concurrency():
    assert AdaptiveLimit().limit == 16
    assert AdaptiveLimit(LimiterConfig(concurrency=3)).limit == 3


def test_slow_start_doubles_per_window_from_16_to_capacity_2000_within_8_windows():
    limit = AdaptiveLimit()
    world = World(limit, CapacityServer(2000), callers=3000, retry=retrying_model())
    world.run_windows(8, limit_at_least=2000)
    assert limit.limit >= 2000
    assert limit.windows <= 8
    assert [value for _, value in limit.history] == [16, 32, 64, 128, 256, 512, 1024, 2048]
    assert limit.decreases == 0


@pytest.mark.parametrize("seed", SEEDS)
def test_limit_averages_near_capacity_256(seed: int):
    world = World(AdaptiveLimit(), CapacityServer(256, seed=seed), callers=1024, retry=retrying_model(), seed=seed)
    mean, answered = settled(world)
    assert 0.85 * 256 <= mean <= 1.3 * 256
    assert answered >= 0.9 * 256 / 0.2


@pytest.mark.parametrize(("rate_429", "goal"), [(0.0, 0.9), (0.3, 0.8)])
@pytest.mark.parametrize("seed", SEEDS)
def test_sustained_load_from_the_first_call_answers_near_capacity(seed: int, rate_429: float, goal: float):
    """benchmarks/llm_saturation.py in simulated time: 1,000 callers for 20 s from a cold limit of 16,
    the ramp and every overshoot's Retry-After sleeps included, against 256 slots of 200 ms."""
    world = World(AdaptiveLimit(), CapacityServer(256, rate_429=rate_429, seed=seed), callers=1000, retry=retrying_model(1.0), seed=seed)
    world.run(20.0)
    assert world.ok / 20.0 >= goal * 256 / 0.2


@pytest.mark.parametrize(("capacity", "healthy"), [(300, 256), (1000, 512)])
def test_overshoot_falls_to_the_last_healthy_limit_then_rises_to_what_the_server_held(capacity: int, healthy: int):
    limit = AdaptiveLimit()
    world = World(limit, CapacityServer(capacity), callers=4 * capacity, retry=retrying_model())
    world.run(3)
    values = [value for _, value in limit.history]
    overshoot = values.index(2 * healthy)
    assert values[overshoot + 1] == healthy  # at once: the last limit judged healthy, never lower
    assert capacity - 2 <= values[overshoot + 2] <= capacity  # a round trip later: what the server held
    assert min(values[overshoot + 1 :]) >= healthy
    assert capacity - 2 <= limit.limit <= 1.05 * capacity


@pytest.mark.parametrize("seed", SEEDS)
def test_background_429s_do_not_stop_the_climb_to_capacity_2000(seed: int):
    limit = AdaptiveLimit()
    server = CapacityServer(2000, rate_429=0.3, seed=seed)
    world = World(limit, server, callers=12_000, retry=retrying_model(), seed=seed)
    world.run_windows(30, limit_at_least=2000)
    assert limit.limit >= 2000
    mean, _ = settled(world, warm_s=1.0, seconds=10.0)
    assert 0.85 * 2000 <= mean <= 1.3 * 2000
    assert limit.background_share == pytest.approx(0.3, abs=0.08)


@pytest.mark.parametrize("retry_after_s", [None, 1.0])
@pytest.mark.parametrize("seed", SEEDS)
def test_background_429s_at_capacity_256_settle_near_256_not_1(seed: int, retry_after_s: float | None):
    limit = AdaptiveLimit()
    server = CapacityServer(256, rate_429=0.3, seed=seed)
    world = World(limit, server, callers=2048, retry=retrying_model(retry_after_s), seed=seed)
    mean, _ = settled(world)
    assert 0.85 * 256 <= mean <= 1.3 * 256
    assert min(value for t, value in limit.history if t > 5.0) >= 0.5 * 256


def test_background_429s_with_callers_retrying_at_once_still_settle_near_capacity():
    world = World(AdaptiveLimit(), CapacityServer(256, rate_429=0.3), callers=1024)
    mean, _ = settled(world)
    assert 0.85 * 256 <= mean <= 1.3 * 256


def test_small_capacity_is_held_too():
    world = World(AdaptiveLimit(), CapacityServer(4), callers=50, retry=retrying_model())
    mean, answered = settled(world)
    assert 0.85 * 4 <= mean <= 1.3 * 4
    assert answered >= 0.9 * 4 / 0.2


@pytest.mark.parametrize(("knee", "factor"), [(64, 4.0), (256, 4.0), (64, 2.0)])
def test_queueing_server_is_held_between_its_knee_and_the_latency_factor(knee: int, factor: float):
    limit = AdaptiveLimit(LimiterConfig(latency_degrade_factor=factor))
    world = World(limit, QueueingServer(knee), callers=8 * knee)
    mean, answered = settled(world, warm_s=10.0, seconds=50.0)
    assert knee <= mean <= 1.1 * factor * knee
    assert answered >= 0.95 * knee / 0.2
    assert limit.baseline_s == pytest.approx(0.2)


def test_slower_provider_becomes_the_new_baseline_after_two_cuts():
    limit = AdaptiveLimit()
    server = CapacityServer(100_000)
    world = World(limit, server, callers=600, retry=retrying_model())
    world.run(5)
    before = limit.limit
    server.latency_s = 2.0  # ten times slower for good, whatever the load
    world.run(60)
    assert limit.decreases == 2  # one cut cannot tell: its window's answers left a latency earlier
    assert limit.limit == before
    assert limit.baseline_s == pytest.approx(2.0, rel=0.1)


def test_absolute_slow_threshold_is_overload():
    limit = AdaptiveLimit(LimiterConfig(slow_latency_ms=1_000))
    world = World(limit, CapacityServer(100_000, latency_s=1.2), callers=64, retry=retrying_model())
    world.run(30)
    assert limit.decreases >= 1
    assert limit.limit < 16


def test_idle_limit_does_not_grow():
    for callers in (1, 8, 15):
        limit = AdaptiveLimit()
        world = World(limit, CapacityServer(1000), callers=callers, retry=retrying_model())
        world.run(30)
        assert limit.limit == 16
        assert limit.in_flight == callers


def test_limit_does_not_grow_beyond_what_the_server_says_remains():
    limit = AdaptiveLimit()
    world = World(limit, CapacityServer(300, sends_remaining=True), callers=1200, retry=retrying_model())
    world.run(10)
    assert max(value for _, value in limit.history) <= 300
    assert world.rate_limited == 0
    assert world.mean_limit(2.0) >= 0.95 * 300


def test_server_saying_none_remain_is_overload():
    limit = AdaptiveLimit()
    tickets = [limit.issue() for _ in range(16)]
    for ticket in tickets:
        limit.complete(ticket, now=0.2, latency_s=0.2, rate_limited=False, remaining=0)
    assert limit.decreases == 1
    assert limit.limit < 16


def test_fast_429s_are_judged_with_the_calls_issued_beside_them_not_in_the_window_they_came_back_in():
    """A doubling's new places draw their fast 429s at once, their answers a latency later: 6 of 32
    completions (0.19, far above a background of 0) are 429s, but none of the calls issued in the
    window before was; judged by its own completions, the window was a false alarm."""
    limit = AdaptiveLimit()
    flying = [limit.issue() for _ in range(16)]
    for ticket in list(flying):  # a healthy first window, each answer's place refilled: 16 to 32
        limit.complete(ticket, now=0.2, latency_s=0.2, rate_limited=False)
        flying.remove(ticket)
        flying.append(limit.issue())
    assert (limit.limit, limit.windows, limit.background_share) == (32, 1, 0.0)
    added = [limit.issue() for _ in range(16)]
    for ticket in added[:6]:
        limit.complete(ticket, now=0.201, latency_s=0.001, rate_limited=True)
    for ticket in flying + added[6:]:
        limit.complete(ticket, now=0.4, latency_s=0.2, rate_limited=False)
    assert limit.windows == 2
    assert limit.decreases == 0
    assert limit.limit == 32


def test_cohort_tells_once_nearly_all_its_calls_are_back():
    cohort = Cohort(first=100)
    assert cohort.holds(100) and cohort.holds(10_000) and not cohort.holds(99)  # open: every later ticket
    cohort.end = 120
    assert not cohort.holds(120)
    cohort.count = cohort.back = 17
    assert not cohort.tells()  # 17 of 20 back
    cohort.back = 18  # one more, abandoned
    assert cohort.tells()
    assert not Cohort(first=0, end=5, back=5, count=5).tells()  # too few to judge


@pytest.mark.parametrize("seed", SEEDS)
def test_a_quotas_429s_cost_slow_start_at_most_the_test_of_its_first_share(seed: int):
    """1,000 callers, 256 places, a 30% quota, Retry-After 1 s: the first share (0.3, not 0 or
    nearly) is an alarm whose test finds a quota; then the limit doubles to the capacity without
    a false alarm (judged by their own completions, doubling windows read 0.4-0.6 and fell back)."""
    limit = AdaptiveLimit()
    world = World(limit, CapacityServer(256, rate_429=0.3, seed=seed), callers=1000, retry=retrying_model(1.0), seed=seed)
    world.run_windows(40, limit_at_least=256)
    values = [value for _, value in limit.history]
    assert values[-1] >= 256
    assert sum(after < before for before, after in itertools.pairwise(values)) <= 1
    assert limit.background_share == pytest.approx(0.3, abs=0.1)


def test_burst_of_429s_lowers_the_limit_once():
    limit = AdaptiveLimit()
    flying = [limit.issue() for _ in range(16)]
    for ticket in list(flying):  # a busy, healthy first window (each answer's place refilled) doubles the limit
        limit.complete(ticket, now=0.2, latency_s=0.2, rate_limited=False)
        flying.remove(ticket)
        flying.append(limit.issue())
    assert limit.limit == 32
    flying += [limit.issue() for _ in range(16)]
    for i, ticket in enumerate(flying):  # the server rejects them all at once
        limit.complete(ticket, now=0.201 + i / 10_000, latency_s=0.001, rate_limited=True)
    assert limit.decreases == 1
    assert limit.limit == 16  # the last limit judged healthy


def _window(limit: AdaptiveLimit, flying: list[int], now: float, *, rejected: list[bool]) -> float:
    """Complete the oldest calls, each place refilled, until one more window is judged; the
    ``i``-th completion is a fast 429 when ``rejected[i % len(rejected)]``, else a 200 ms answer."""
    windows, i = limit.windows, 0
    while limit.windows == windows:
        now += 0.0005
        is_429 = rejected[i % len(rejected)]
        limit.complete(flying.pop(0), now=now, latency_s=0.001 if is_429 else 0.2, rate_limited=is_429)
        i += 1
        while limit.has_room:
            flying.append(limit.issue())
    return now


def _drain(limit: AdaptiveLimit, flying: list[int], now: float, latencies: list[float]) -> float:
    """The calls in flight at a decrease come back: answered with ``latencies``, the rest cancelled; then refill."""
    for ticket, latency in itertools.zip_longest(flying, latencies[: len(flying)]):
        if latency is None:
            limit.abandon(ticket)
        else:
            limit.complete(ticket, now=now + latency, latency_s=latency, rate_limited=False)
    flying[:] = []
    while limit.has_room:
        flying.append(limit.issue())
    return now + max(latencies)


def _overshoot_to_512_and_back(latencies: list[float]) -> tuple[AdaptiveLimit, list[int], float]:
    limit = AdaptiveLimit(LimiterConfig(concurrency=256))
    flying = [limit.issue() for _ in range(256)]
    now = _window(limit, flying, 0.0, rejected=[False])  # busy and healthy: slow start doubles
    now = _window(limit, flying, now, rejected=[True])  # 512: the calls beyond capacity churn through fast 429s
    assert [value for _, value in limit.history] == [256, 512, 256]
    return limit, flying, _drain(limit, flying, now, latencies)


def test_answers_that_waited_for_a_freed_slot_do_not_count_as_held_at_an_overshoot():
    """Over HTTP the calls in flight at a decrease include some the server took only once the first
    ones freed their slots, or answered while the busy client read late: they come back slower.
    Counted as held, 120 of them raised the limit to 376 over a capacity of 256."""
    limit, flying, now = _overshoot_to_512_and_back([0.2] * 256 + [0.35] * 120)
    _window(limit, flying, now, rejected=[False])  # the window that tests the decrease: healthy
    assert limit.limit == 256, limit.history


def test_429s_as_frequent_a_few_calls_under_a_probe_are_capacity_not_a_background_share():
    """Past a capacity every spare slot churns through fast 429s, a few slots as many as many: a cut
    to 256 from a probe at 260, with the server said to have held 258 (calls in transit), leaves
    the share as high. A quota's background it is not: the limit is cut below what the server held
    (0.96 of it) instead of the probe undone and 0.4 learned as background."""
    limit, flying, now = _overshoot_to_512_and_back([0.2] * 256)
    while limit.limit <= 256:
        now = _window(limit, flying, now, rejected=[False])  # additive increase: a probe
    probe = limit.limit
    now = _window(limit, flying, now, rejected=[False, False, False, True, True])  # 0.4 of 429s: overload
    assert limit.limit == 256 < probe
    now = _drain(limit, flying, now, [0.2] * 258)
    _window(limit, flying, now, rejected=[False, False, False, True, True])  # as many at 256
    assert limit.background_share < 0.1
    assert limit.limit <= 0.96 * 258, limit.history


@pytest.mark.parametrize(("refilled", "after"), [(10**9, 512), (480, 512), (300, 299)])
def test_a_slow_start_alarm_is_undone_only_when_the_limit_was_in_use_and_the_server_held_it(refilled: int, after: int):
    """A doubling to 512 sees a third of its completions come back fast 429s: cut to 256. The server
    then answers every call that was in flight at the cut. With the limit filled (511 or 479 calls,
    0.9 of 512 or more) that proves the alarm false, and 512 comes back. With callers gone quiet on
    Retry-After (299 in flight) it proves only 299: the limit goes there, not back to 512."""
    limit = AdaptiveLimit(LimiterConfig(concurrency=256))
    flying = [limit.issue() for _ in range(256)]
    now = _window(limit, flying, 0.0, rejected=[False])
    assert limit.limit == 512
    i = 0
    while limit.windows == 1:  # the alarm: every third completion a fast 429; callers refill only at first
        now += 0.0005
        limit.complete(flying.pop(0), now=now, latency_s=0.001 if i % 3 == 2 else 0.2, rate_limited=i % 3 == 2)
        i += 1
        while i < refilled and limit.has_room:
            flying.append(limit.issue())
    assert limit.limit == 256 and limit.decreases == 1
    now = _drain(limit, flying, now, [0.2] * len(flying))  # the server answers all of them
    _window(limit, flying, now, rejected=[False])
    assert limit.limit == after, limit.history


def test_abandoned_call_frees_its_place_and_teaches_nothing():
    limit = AdaptiveLimit(LimiterConfig(concurrency=1))
    limit.abandon(limit.issue())
    assert (limit.limit, limit.in_flight, limit.decreases, limit.windows) == (1, 0, 0, 0)


def test_limit_floor_is_one():
    limit = AdaptiveLimit(LimiterConfig(concurrency=1))
    for _ in range(50):
        tickets = [limit.issue() for _ in range(limit.limit)]
        for ticket in tickets:
            limit.complete(ticket, now=0.0, latency_s=0.001, rate_limited=True)
    assert limit.limit == 1


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


async def test_semaphore_growth_wakes_waiters_and_stamps_history():
    ticks = itertools.count()
    semaphore = AdaptiveSemaphore(LimiterConfig(concurrency=1), clock=lambda: next(ticks) * 0.01)
    entered = 0

    async def call() -> None:
        nonlocal entered
        async with semaphore.slot() as slot:
            entered += 1
            await asyncio.sleep(0)
            slot.record(0.01, rate_limited=False)

    await asyncio.gather(*(call() for _ in range(20)))
    assert entered == 20
    assert semaphore.limit >= 2  # a window of 8 completions with the limit in use doubled it
    assert semaphore.history[0] == (0.0, 1)
    assert semaphore.history[1][1] == 2


class Answering:
    """A ChatModel answering at once with a given ``x-ratelimit-remaining-requests``, or 429."""

    def __init__(self, *, remaining: int | None = None, rate_limited: bool = False) -> None:
        self.remaining = remaining
        self.rate_limited = rate_limited

    async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        await asyncio.sleep(0.001)
        if self.rate_limited:
            raise LLMRateLimitError("slow down", status=429, retry_after=1.0)
        return ChatResult(text="ok", model="fake", rate_limit_remaining=self.remaining)


async def test_limited_model_passes_what_the_server_says_remains_to_the_limiter():
    limiter = AdaptiveSemaphore(LimiterConfig(concurrency=16))
    model = LimitedModel(Answering(remaining=0), limiter)
    await asyncio.gather(*(model.complete([{"role": "user", "content": "hi"}]) for _ in range(32)))
    assert limiter.core.decreases >= 1  # 0 remaining is overload
    assert limiter.limit < 16
    assert limiter.in_flight == 0


async def test_limited_model_reports_429s_as_rate_limited():
    limiter = AdaptiveSemaphore(LimiterConfig(concurrency=16))
    model = LimitedModel(Answering(rate_limited=True), limiter)
    results = await asyncio.gather(
        *(model.complete([{"role": "user", "content": "hi"}]) for _ in range(32)), return_exceptions=True
    )
    assert all(isinstance(result, LLMRateLimitError) for result in results)
    assert limiter.core.decreases >= 1
    assert limiter.in_flight == 0


async def test_limited_model_backs_off_on_429s_over_real_http():
    faults = SimFaults(capacity=8, latency_ms=50, retry_after_s=0.05)
    with serving(SimLLM(), faults) as url:
        client = LLMClient(model="openai/sim", base_url=url + "/v1")
        limiter = AdaptiveSemaphore(LimiterConfig(concurrency=16))
        model = RetryingModel(LimitedModel(LiteLLMChatModel(client), limiter), max_attempts=30, base_delay=0.01, max_delay=0.2)
        calls = 160  # enough for the windows after the first one: its cohort judged, the decrease tested
        results = await asyncio.gather(*(model.complete([{"role": "user", "content": f"caller {i}"}]) for i in range(calls)))
        async with httpx.AsyncClient() as http:
            stats = (await http.get(url + "/stats")).json()

    assert all(result.text for result in results)
    assert stats["outcomes"]["ok"] == calls
    assert stats["outcomes"]["rejected_capacity"] > 0  # 16 > 8: the server pushed back
    assert stats["max_in_flight"] <= 8
    assert limiter.core.decreases >= 1
    # litellm's own time per call keeps a few more in flight at the client than the server's 8
    assert min(limit for _, limit in limiter.history) <= 12
    assert limiter.in_flight == 0


def test_dispatcher_keeps_one_limiter_per_client_and_none_for_the_in_process_sim():
    client = LLMClient(model="openai/limited", base_url="http://127.0.0.1:9/v1", limits=LimiterConfig(concurrency=5))
    get_chat_model(client)
    limiter = limiter_for(client)
    assert isinstance(limiter, AdaptiveSemaphore)
    assert limiter.limit == 5
    get_chat_model(client)
    assert limiter_for(client) is limiter

    sim = LLMClient(model="sim/default:unlimited")
    get_chat_model(sim)
    assert limiter_for(sim) is None
