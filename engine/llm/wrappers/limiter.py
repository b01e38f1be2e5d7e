"""The asyncio shell of the AIMD limiter: a semaphore whose size follows :class:`~engine.llm.wrappers.aimd.AdaptiveLimit`.

``AdaptiveSemaphore`` queues callers (first in, first out) and hands out slots; ``Slot`` reports how
each call went. The rules that decide the limit live in the sans-IO core, :mod:`engine.llm.wrappers.aimd`.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable
from types import TracebackType

from engine.llm.client import LimiterConfig
from engine.llm.wrappers.aimd import AdaptiveLimit, Outcome

__all__ = ["AdaptiveLimit", "AdaptiveSemaphore", "Outcome", "Slot"]


class Slot:
    """One call's hold on the limiter; ``record`` how the call went before leaving the block."""

    def __init__(self, semaphore: AdaptiveSemaphore) -> None:
        self._semaphore = semaphore
        self._ticket: int | None = None
        self._result: tuple[float, bool, int | None] | None = None

    def record(self, latency_s: float, rate_limited: bool, remaining: int | None = None) -> None:
        """Report the call's latency, whether the provider answered 429, and what it said remains.

        Args:
            latency_s: seconds the call took.
            rate_limited: the provider answered 429.
            remaining: the provider's ``x-ratelimit-remaining-requests``; None where it sent none.
        """
        self._result = (latency_s, rate_limited, remaining)

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

    def _release(self, ticket: int, result: tuple[float, bool, int | None] | None) -> None:
        if result is None:
            self.core.abandon(ticket)
        else:
            latency_s, rate_limited, remaining = result
            self.core.complete(ticket, now=self._clock(), latency_s=latency_s, rate_limited=rate_limited, remaining=remaining)
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.core.has_room:
            waiter = self._waiters.popleft()
            if waiter.done() or waiter.get_loop().is_closed():
                continue
            waiter.set_result(self.core.issue())
