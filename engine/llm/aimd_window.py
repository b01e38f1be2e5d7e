"""What one window of an AIMD limiter saw, and the statistics it is judged by (no state, no clock).

``engine.llm.aimd`` keeps the limit; this module says what a window counted (``Window``), what
the calls issued while it was open told once back (``Cohort``), what a decrease remembers until
the next window tests it (``Decrease``), and how far shares and counts may stray by chance.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

__all__ = [
    "Cause", "Cohort", "Decrease", "Window", "difference_noise", "held_then", "holding", "in_use", "noise", "pooled", "served", "weighted",
]

Cause = Literal["rate_limited", "slow", "exhausted"]
#: Standard errors of a window's 429 share that are put down to chance (small windows are noisy).
_NOISE_Z = 2.5
#: Standard errors by which a 429 share may fall after a decrease and still count as unchanged.
_DIFFERENCE_Z = 2.0
#: A window's limit was in use if this share of its completions found in-flight at the limit.
_IN_USE = 0.9
#: An answer to a call in flight at a decrease took at most this multiple of the baseline if the
#: server held the call from the start.
_HELD_LATENCY = 1.5


#: A cohort tells its 429 share once this share of its calls is back.
_BACK = 0.9
#: Completions a cohort needs at least before its share is judged.
_MIN_COHORT = 8


@dataclass
class Cohort:
    """The calls issued while one window was open, followed until they are back.

    Their 429 share is what the provider answered to calls issued at that limit. A window's own
    completions are not: a fast 429 comes back in it, the answer to a call issued beside it only
    a latency later, in the next window (after a doubling, twice as many such calls).
    """

    first: int  #: the first ticket
    end: int | None = None  #: one past the last ticket (None while the window is open)
    back: int = 0  #: completed or abandoned
    count: int = 0  #: completed
    rate_limited: int = 0  #: of them answered 429

    def holds(self, ticket: int) -> bool:
        return self.first <= ticket and (self.end is None or ticket < self.end)

    def tells(self) -> bool:
        """Whether nearly all calls are back (and there are enough to judge)."""
        issued = (self.first if self.end is None else self.end) - self.first
        return self.count >= _MIN_COHORT and self.back >= _BACK * issued


@dataclass
class Window:
    """What the completions of one window told."""

    opened: float  #: when the previous window closed (or the limiter was created)
    peak: int  #: most calls in flight at once during the window
    saturated: bool  #: in-flight reached the limit during the window
    count: int = 0  #: completions counted
    rate_limited: int = 0  #: of them answered 429
    answered: list[float] = field(default_factory=list)  #: latencies of the others
    rate_limited_s: float = 0.0  #: summed latency of the 429s
    full: int = 0  #: completions that found in-flight at the limit
    first_issue: float = math.inf  #: when the earliest counted call was issued
    allowed: int | None = None  #: least in-flight plus ``x-ratelimit-remaining-requests`` an answer told
    exhausted: bool = False  #: the server said 0 remain
    cohort: Cohort = field(default_factory=lambda: Cohort(0))  #: the calls issued while it is open


@dataclass(frozen=True)
class Decrease:
    """A decrease and the window that caused it, kept until the next window tests it."""

    cause: Cause
    limit: int  #: the limit before
    slow_start: bool  #: slow start was on before
    share: float  #: the window's 429 share
    count: int  #: the window's calls
    median_s: float | None  #: the window's median answered latency
    overloaded_at: int  #: ``_overloaded_at`` before (restored if the decrease is undone)
    backoff: int  #: ``_backoff`` before
    as_slow: int = 0  #: windows since the first of these decreases that were as slow as the one before


def noise(share: float, n: int) -> float:
    """How far a window of ``n`` calls may stray from ``share`` by chance."""
    share = min(max(share, 0.01), 0.99)
    return _NOISE_Z * math.sqrt(share * (1 - share) / n)


def pooled(tested: Decrease, share: float, count: int) -> float:
    """The 429 share of the window that caused a decrease and the one that tested it, together."""
    return weighted(tested.share, tested.count, share, count)[0]


def weighted(share: float, count: int, other: float, other_count: int) -> tuple[float, int]:
    """Two samples' 429 shares pooled, and the calls behind them."""
    total = count + other_count
    return (share * count + other * other_count) / total, total


def difference_noise(tested: Decrease, share: float, count: int) -> float:
    """How far two windows' 429 shares may differ by chance when both have the same rate."""
    both = min(max(pooled(tested, share, count), 0.01), 0.99)
    return _DIFFERENCE_Z * math.sqrt(both * (1 - both) * (1 / tested.count + 1 / count))


def held_then(latency_s: float, baseline_s: float | None) -> bool:
    """Whether a call in flight at a decrease, answered in ``latency_s``, was held by the server then.

    A slower answer waited (in transit, in the server's accept queue, unread by a busy client) for
    a slot the first answers freed: counted as held, such calls make the capacity look larger.
    """
    return baseline_s is None or latency_s <= _HELD_LATENCY * baseline_s


def holding(window: Window, in_flight: int, now: float) -> float:
    """Calls in flight now that the server holds: all of them but those on their way to a 429.

    Little's law on the 429s: 429s per second times their latency is how many are in flight.
    A rough, immediate figure; the next window learns the exact one from the calls held now.
    """
    span = now - max(window.opened, window.first_issue)
    rejecting = window.rate_limited_s / span if span > 0 else 0.0
    return max(0.0, in_flight - rejecting)


def served(window: Window, baseline_s: float | None, now: float) -> float | None:
    """The concurrency a queueing server serves at healthy speed: answers per second times the baseline."""
    span = now - max(window.opened, window.first_issue)
    if not window.answered or span <= 0 or baseline_s is None:
        return None
    return len(window.answered) * baseline_s / span


def in_use(window: Window) -> bool:
    """Whether the limit bound in the window: in-flight was at it for nearly every completion.

    Callers who sleep off their 429s leave in-flight below the limit between returns; a limit
    touched only now and then is not in use.
    """
    return window.saturated and window.full >= _IN_USE * window.count
