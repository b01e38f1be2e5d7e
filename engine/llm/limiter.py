"""AIMD on the number of LLM calls one process keeps in flight.

``AdaptiveLimit`` is the sans-IO core: it is told when a call is issued and how each one ended,
and decides the limit. ``AdaptiveSemaphore`` is the asyncio shell that queues callers (first in,
first out) and hands out slots. There is no upper bound: the limit grows until the provider
pushes back.

The rules:

- **Slow start.** Until the first decrease, each healthy completion adds one while the limit is
  in use, so a busy limit doubles per round trip (TCP's slow start). Without it, climbing from
  the initial 16 to a capacity of 256 at +1 per round trip takes 240 round trips: 48 s at
  200 ms, eight minutes at a real provider's 2 s.
- **Additive increase.** After that, +1 per window of ``limit`` healthy completions, and only if
  in-flight reached the limit during the window: an idle limit does not grow.
- **Multiplicative decrease.** Halve (floor 1) on a 429, on a latency above
  ``latency_degrade_factor`` times the recent baseline, or on a latency above ``slow_latency_ms``
  when set. The baseline is an EWMA of answered calls' latencies, each judged before it is
  learned. Slow answers are learned too: a provider that became slower for good must become the
  new normal, or the limit would be pinned at 1.
- **One decrease per epoch.** A bad outcome of a call issued before the last decrease is
  ignored, so a burst of 429s from one overloaded moment halves the limit once, not once per
  call. The same calls do not count towards the next increase either.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from types import TracebackType
from typing import Literal

from engine.llm.client import LimiterConfig

__all__ = ["AdaptiveLimit", "AdaptiveSemaphore", "Outcome", "Slot"]

Outcome = Literal["healthy", "rate_limited", "slow"]
#: Weight of a new answered call's latency in the baseline (about the last 20 calls count).
_BASELINE_ALPHA = 0.05
#: Answered calls needed before the relative latency rule applies.
_BASELINE_MIN_SAMPLES = 8


class AdaptiveLimit:
    """The AIMD decisions, fed events; no clock, no asyncio.

    Args:
        config: the initial limit and the latency rules.
        now: the time of creation (the first point of ``history``).
    """

    def __init__(self, config: LimiterConfig | None = None, *, now: float = 0.0) -> None:
        self.config = config or LimiterConfig()
        self.limit = self.config.concurrency
        self.in_flight = 0
        self.history: list[tuple[float, int]] = [(now, self.limit)]  #: (time, limit) at start and each change
        self.baseline_s: float | None = None  #: EWMA of answered calls' latencies (429s excluded)
        self.decreases = 0
        self._samples = 0
        self._issued = 0  #: tickets handed out so far; the next ticket's number
        self._fence = 0  #: tickets below this were issued before the last decrease
        self._slow_start = True
        self._healthy = 0  #: healthy completions (after the fence) in the current window
        self._saturated = False  #: in-flight reached the limit since the last increase

    @property
    def has_room(self) -> bool:
        """Whether one more call may start now."""
        return self.in_flight < self.limit

    def issue(self) -> int:
        """Count a call that starts now (the caller checks ``has_room``).

        Returns:
            The call's ticket, to hand back to ``complete`` or ``abandon``.
        """
        self.in_flight += 1
        if self.in_flight >= self.limit:
            self._saturated = True
        ticket = self._issued
        self._issued += 1
        return ticket

    def abandon(self, ticket: int) -> None:
        """Count a call that ended without telling anything about load (cancelled, non-429 error)."""
        self.in_flight -= 1

    def complete(self, ticket: int, *, now: float, latency_s: float, rate_limited: bool) -> Outcome:
        """Count a call that ended and adjust the limit.

        Args:
            ticket: what ``issue`` returned for the call.
            now: the time of completion (stamped on a change in ``history``).
            latency_s: how long the call took.
            rate_limited: the provider answered 429.

        Returns:
            How the call was judged.
        """
        self.in_flight -= 1
        outcome = self._judge(latency_s, rate_limited)
        if not rate_limited:
            self._learn(latency_s)
        if ticket < self._fence:
            return outcome
        if outcome == "healthy":
            self._grow(now)
        else:
            self._decrease(now)
        return outcome

    def _judge(self, latency_s: float, rate_limited: bool) -> Outcome:
        if rate_limited:
            return "rate_limited"
        slow_ms = self.config.slow_latency_ms
        if slow_ms is not None and latency_s * 1000 > slow_ms:
            return "slow"
        baseline = self.baseline_s
        if (
            baseline is not None
            and self._samples >= _BASELINE_MIN_SAMPLES
            and latency_s > self.config.latency_degrade_factor * baseline
        ):
            return "slow"
        return "healthy"

    def _learn(self, latency_s: float) -> None:
        self._samples += 1
        if self.baseline_s is None:
            self.baseline_s = latency_s
        else:
            self.baseline_s += _BASELINE_ALPHA * (latency_s - self.baseline_s)

    def _grow(self, now: float) -> None:
        if self._slow_start:
            if self._saturated:
                self._set(now, self.limit + 1)
            return
        self._healthy += 1
        if self._healthy < self.limit:
            return
        self._healthy = 0
        if self._saturated:
            self._set(now, self.limit + 1)
        else:
            self._saturated = self.in_flight >= self.limit

    def _decrease(self, now: float) -> None:
        self.decreases += 1
        self._slow_start = False
        self._fence = self._issued
        self._healthy = 0
        self._set(now, max(1, self.limit // 2))

    def _set(self, now: float, limit: int) -> None:
        if limit != self.limit:
            self.limit = limit
            self.history.append((now, limit))
        # a new limit starts a new "in use?" question
        self._saturated = self.in_flight >= limit


class Slot:
    """One call's hold on the limiter; ``record`` how the call went before leaving the block."""

    def __init__(self, semaphore: AdaptiveSemaphore) -> None:
        self._semaphore = semaphore
        self._ticket: int | None = None
        self._result: tuple[float, bool] | None = None

    def record(self, latency_s: float, rate_limited: bool) -> None:
        """Report the call's latency and whether the provider answered 429.

        Args:
            latency_s: seconds the call took.
            rate_limited: the provider answered 429.
        """
        self._result = (latency_s, rate_limited)

    async def __aenter__(self) -> Slot:
        self._ticket = await self._semaphore._acquire()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        ticket, self._ticket = self._ticket, None
        if ticket is not None:
            self._semaphore._release(ticket, self._result)


class AdaptiveSemaphore:
    """A semaphore whose size follows ``AdaptiveLimit``; waiters are served first in, first out.

    Use ``async with semaphore.slot() as slot: ...; slot.record(latency_s, rate_limited)``. A slot
    left without a record (an exception, a cancellation) frees its place and teaches nothing.
    One instance serves one event loop.

    Args:
        config: the initial limit and the latency rules.
        clock: seconds, monotonic (stamps ``history``).
    """

    def __init__(self, config: LimiterConfig | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.core = AdaptiveLimit(config, now=clock())
        self._waiters: deque[asyncio.Future[int]] = deque()

    @property
    def limit(self) -> int:
        """The current limit on calls in flight."""
        return self.core.limit

    @property
    def in_flight(self) -> int:
        """Calls holding a slot now."""
        return self.core.in_flight

    @property
    def waiting(self) -> int:
        """Callers queued for a slot."""
        return len(self._waiters)

    @property
    def history(self) -> list[tuple[float, int]]:
        """``(time, limit)`` at creation and at each change, times from ``clock``."""
        return self.core.history

    def slot(self) -> Slot:
        """A slot to hold for the duration of one call (``async with``)."""
        return Slot(self)

    async def _acquire(self) -> int:
        if not self._waiters and self.core.has_room:
            return self.core.issue()
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                # the slot was handed over just as the caller was cancelled: give it back
                self.core.abandon(waiter.result())
                self._wake()
            elif waiter in self._waiters:  # not yet skipped by _wake
                self._waiters.remove(waiter)
            raise

    def _release(self, ticket: int, result: tuple[float, bool] | None) -> None:
        if result is None:
            self.core.abandon(ticket)
        else:
            latency_s, rate_limited = result
            self.core.complete(ticket, now=self._clock(), latency_s=latency_s, rate_limited=rate_limited)
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.core.has_room:
            waiter = self._waiters.popleft()
            if waiter.done() or waiter.get_loop().is_closed():
                continue
            waiter.set_result(self.core.issue())
