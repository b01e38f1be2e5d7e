"""Simulated servers and callers that drive an ``AdaptiveLimit`` in simulated time (no asyncio).

A ``World`` is a discrete-event simulation of one process's callers sharing the limiter, queued
first in, first out as ``AdaptiveSemaphore`` queues them, against one server model:

- ``CapacityServer``: at most ``capacity`` calls in flight; one more is answered 429 at once.
  ``rate_429`` answers that share of the calls it would accept with 429 anyway (a quota).
- ``QueueingServer``: accepts everything and gets slower with load (vLLM): latency is the base
  latency times ``in_flight / knee`` above the knee.
"""

from __future__ import annotations

import heapq
import itertools
import random
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from engine.llm.wrappers.limiter import AdaptiveLimit

__all__ = ["CapacityServer", "QueueingServer", "World", "retrying_model"]


@dataclass
class CapacityServer:
    """Rejects beyond ``capacity`` concurrent calls at once; a share ``rate_429`` is rejected regardless."""

    capacity: int
    latency_s: float = 0.2
    rate_429: float = 0.0
    reject_s: float = 0.001  #: how long a 429 takes to come back
    jitter: float = 0.1  #: answers take ``latency_s`` times 1 plus or minus this (no two calls in lockstep)
    sends_remaining: bool = False  #: answers carry ``x-ratelimit-remaining-requests``: the free places
    seed: int = 0
    in_flight: int = 0
    _rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)

    def admit(self) -> tuple[float, bool, int | None]:
        """A call arrives: its latency, whether it is answered 429, and the remaining places it is told."""
        if self.in_flight >= self.capacity or self._rng.random() < self.rate_429:
            return self.reject_s, True, None
        self.in_flight += 1
        remaining = self.capacity - self.in_flight if self.sends_remaining else None
        return self.latency_s * (1 + self.jitter * (2 * self._rng.random() - 1)), False, remaining

    def leave(self) -> None:
        self.in_flight -= 1


@dataclass
class QueueingServer:
    """Never rejects; above ``knee`` calls in flight each call is slower in proportion."""

    knee: int
    latency_s: float = 0.2
    in_flight: int = 0

    def admit(self) -> tuple[float, bool, int | None]:
        """A call arrives: its latency (longer the more are in flight), never a 429."""
        self.in_flight += 1
        return self.latency_s * max(1.0, self.in_flight / self.knee), False, None

    def leave(self) -> None:
        self.in_flight -= 1


def retrying_model(retry_after_s: float | None = None) -> Callable[[int, random.Random], float]:
    """The wait before a caller's next try, as ``RetryingModel`` (defaults) waits after its ``attempt``-th 429.

    Args:
        retry_after_s: the ``Retry-After`` the server sends with each 429; None = none.
    """

    def delay(attempt: int, rng: random.Random) -> float:
        backoff = min(20.0, 0.5 * 2 ** (attempt - 1)) * (0.5 + rng.random())
        return backoff if retry_after_s is None else max(backoff, retry_after_s)

    return delay


class World:
    """``callers`` callers making calls one after another through ``limit``, against ``server``.

    Args:
        limit: the limiter core under test.
        server: a ``CapacityServer`` or ``QueueingServer``.
        callers: how many callers.
        calls: calls per caller; None = until the simulation stops.
        retry: seconds a caller waits after its ``attempt``-th 429 (see ``retrying_model``);
            None = at once, a harsher load than any real caller's.
        max_attempts: tries per call before it counts as failed (a caller then goes on to its next call).
    """

    def __init__(
        self,
        limit: AdaptiveLimit,
        server: CapacityServer | QueueingServer,
        *,
        callers: int,
        calls: int | None = None,
        retry: Callable[[int, random.Random], float] | None = None,
        max_attempts: int = 1_000_000,
        seed: int = 0,
    ) -> None:
        self.limit = limit
        self.server = server
        self.now = 0.0
        self.ok = 0
        self.rate_limited = 0
        self.failed = 0
        self.ok_latency_s = 0.0  #: summed latency of answered calls
        self.done_at = 0.0  #: when the last caller finished its calls
        self._retry = retry
        self._max_attempts = max_attempts
        self._rng = random.Random(seed)
        self._queue: deque[int] = deque()
        self._events: list[tuple[float, int, Callable[[], None]]] = []
        self._seq = itertools.count()
        self._left = [calls] * callers
        self._attempt = [1] * callers
        for caller in range(callers):
            self._want(caller)

    def run(self, seconds: float) -> None:
        """Advance simulated time by ``seconds`` (or until nothing is left to happen)."""
        end = self.now + seconds
        while self._events and self._events[0][0] <= end:
            self.now, _, action = heapq.heappop(self._events)
            action()
        self.now = max(self.now, end) if self._events else self.now

    def run_windows(self, windows: int, *, limit_at_least: int | None = None, max_seconds: float = 600) -> None:
        """Advance until ``limit.windows`` has grown by ``windows`` (or ``limit_at_least`` is reached)."""
        target = self.limit.windows + windows
        end = self.now + max_seconds
        while self._events and self.now < end and self.limit.windows < target:
            if limit_at_least is not None and self.limit.limit >= limit_at_least:
                return
            self.now, _, action = heapq.heappop(self._events)
            action()

    def mean_limit(self, since: float) -> float:
        """The limit averaged over time from ``since`` to now."""
        points = [(t, limit) for t, limit in self.limit.history]
        total, current = 0.0, points[0][1]
        last = since
        for t, limit in points:
            if t <= since:
                current = limit
                continue
            if t > self.now:
                break
            total += current * (t - last)
            last, current = t, limit
        total += current * (self.now - last)
        return total / (self.now - since)

    def _at(self, t: float, action: Callable[[], None]) -> None:
        heapq.heappush(self._events, (t, next(self._seq), action))

    def _want(self, caller: int) -> None:
        if self._left[caller] == 0:
            self.done_at = self.now
            return
        if not self._queue and self.limit.has_room:
            self._start(caller)
        else:
            self._queue.append(caller)

    def _start(self, caller: int) -> None:
        ticket = self.limit.issue()
        latency_s, rate_limited, remaining = self.server.admit()
        self._at(self.now + latency_s, lambda: self._finish(caller, ticket, latency_s, rate_limited, remaining))

    def _finish(self, caller: int, ticket: int, latency_s: float, rate_limited: bool, remaining: int | None) -> None:
        if not rate_limited:
            self.server.leave()
        self.limit.complete(ticket, now=self.now, latency_s=latency_s, rate_limited=rate_limited, remaining=remaining)
        while self._queue and self.limit.has_room:
            self._start(self._queue.popleft())
        if rate_limited:
            self.rate_limited += 1
            attempt = self._attempt[caller]
            if attempt < self._max_attempts:
                self._attempt[caller] = attempt + 1
                delay = 0.0 if self._retry is None else self._retry(attempt, self._rng)
                self._at(self.now + delay, lambda: self._want(caller))
                return
            self.failed += 1
        else:
            self.ok += 1
            self.ok_latency_s += latency_s
        self._attempt[caller] = 1
        if self._left[caller] is not None:
            self._left[caller] -= 1
        self._want(caller)
