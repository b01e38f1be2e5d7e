"""AIMD on the number of LLM calls one process keeps in flight, judged one window at a time.

``AdaptiveLimit`` is the sans-IO core: it is told when a call is issued and how each one ended,
and decides the limit; :mod:`engine.llm.wrappers.limiter` holds the asyncio shell that queues callers.
Slow start doubles it until the first sign of overload (429s above the background share, answers
slower than the baseline, none remaining); then it grows additively and falls at once toward the
capacity the server showed, never by half. A window is judged by the calls issued in the one before
(a cohort), not by its own completions, where fast 429s come a latency before the answers to the
calls issued beside them. docs/limiter.md states every rule and why.

A window says what it counted (``Window``), what the calls issued while it was open told once back (``Cohort``),
what a decrease remembers until the next window tests it (``Decrease``), and how far shares and counts may stray
by chance.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field, replace
from typing import Literal

from engine.llm.client import LimiterConfig

__all__ = [
    "AdaptiveLimit", "Cause", "Cohort", "Decrease", "Outcome", "Window", "difference_noise", "held_then", "holding", "in_use",
    "noise", "pooled", "served", "weighted",
]

# ---- one window: what it counted, and the statistics it is judged by (no state, no clock) ----------------

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


# ---- the limit ------------------------------------------------------------------------------------------

Outcome = Literal["healthy", "rate_limited", "slow"]
#: A window's 429 share may exceed the background share by this much before it is overload.
_MARGIN = 0.1
#: A window closes early once this much more than the overload share of its size came back 429.
_EARLY = 0.4
#: The first window closes, as churn, once this many times its size came back 429 before 8 answers (once
#: its size did, before any answer).
_FLOOD = 4
#: A window whose own 429 share is this much above the overload share is overload, whatever its cohort.
_FAR = 0.2
#: A first 429 share up to this is the reference; a higher one (a quota's? capacity below the first limit?)
#: is an alarm whose decrease the next window tests.
_TRUSTED = 0.15
#: The server held nearly every call in flight at a decrease if it answered this share of them.
_HELD_ALL = 0.98
#: A decrease found its limit in use if this share of it was in flight (the server holding the few calls of
#: callers awake, the others asleep on Retry-After, says nothing of the limit).
_FILLED = 0.9
#: Calls the two windows of a "not load" verdict need together (fewer cannot tell 0.5 from 0.25).
_MIN_VERDICT = 64
#: Completions a window needs at least (a share of one or two calls says nothing).
_MIN_WINDOW = 8
#: Answered calls a window needs before its median latency is judged or learned.
_MIN_SAMPLES = 8
#: One decrease keeps at least this share of the limit.
_MIN_KEPT = 0.25
#: Weight of a healthy window in lowering the background share and the baseline.
_LEARN = 0.25
#: A decrease to this share of the limit or less can tell whether 429s or latency follow load: after
#: it, a median above this share of the overloaded window's did not fall.
_NOT_FASTER = 0.8
#: Additive increase: this share of the limit per window, at least 1, doubled per increase since the
#: last decrease up to the most share.
_STEP = 1 / 64
_MAX_STEP = 1 / 8
#: A limit tells whether 429s follow load at this share of what the server held or less (calls in
#: transit at a decrease make "held" a few percent more than the server's capacity).
_TELL = 0.96
#: After a decrease, the next window opens once all but this share of the calls issued before it are back.
_STRAGGLERS = 0.02
#: Most healthy windows waited after a decrease before probing again.
_MAX_WAIT = 16


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
        self.baseline_s: float | None = None  #: healthy median latency of answered calls (429s excluded)
        self.background_share = 0.0  #: share of 429s that does not follow load (a quota's)
        self._reference_n = 0  #: calls behind the slow-start reference share
        self.decreases = 0
        self.windows = 0  #: windows judged so far
        self._issued = 0  #: tickets handed out so far; the next ticket's number
        self._fence = 0  #: tickets below this were issued before the last decrease
        self._held = 0  #: calls issued before the last decrease, still in flight
        self._held_answered = 0  #: calls issued before the last decrease that came back answered since
        self._held_from = 0  #: calls in flight at the last decrease
        self._settling = False  #: calls issued before the last decrease are still draining; no window is open
        self._slow_start = True
        self._healthy_limit: int | None = None  #: the last limit judged healthy while in use, since the last decrease
        self._overloaded_at = 0  #: the limit at the last decrease
        self._backoff = 1  #: healthy windows to wait after the next decrease before growing again
        self._wait = 0  #: healthy windows still to wait before growing again
        self._streak = 0  #: increases since the last decrease (each doubles the next step)
        self._tested: Decrease | None = None  #: the decrease the current window tests
        self._latency_s: float | None = None  #: the last window's median answered latency: a window lasts this long
        self._as_slow = False  #: the window that just closed was as slow as the one that caused the decrease
        self._started = False  #: the first window has closed
        self._previous: Cohort | None = None  #: the calls issued in the window before, since the last decrease
        self._window = self._open(now)

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
        window = self._window
        window.peak = max(window.peak, self.in_flight)
        if self.in_flight >= self.limit:
            window.saturated = True
        ticket = self._issued
        self._issued += 1
        return ticket

    def abandon(self, ticket: int) -> None:
        """Count a call that ended without telling anything about load (cancelled, non-429 error)."""
        self.in_flight -= 1
        if ticket < self._fence:
            self._held -= 1
            self._settle(self._window.opened)
        elif (cohort := self._cohort_of(ticket)) is not None:
            cohort.back += 1

    def complete(self, ticket: int, *, now: float, latency_s: float, rate_limited: bool, remaining: int | None = None) -> Outcome:
        """Count a call that ended; at the end of a window, adjust the limit.

        Args:
            ticket: what ``issue`` returned for the call.
            now: the time of completion (stamped on a change in ``history``).
            latency_s: how long the call took.
            rate_limited: the provider answered 429.
            remaining: the provider's ``x-ratelimit-remaining-requests``, where it sent one.

        Returns:
            How the call alone looks (the limit follows whole windows, not this).
        """
        flying = self.in_flight  # this call included, as the server counted it when it answered
        full = flying >= self.limit
        self.in_flight -= 1
        outcome = self._judge(latency_s, rate_limited)
        if ticket < self._fence:
            self._held -= 1
            self._held_answered += not rate_limited and held_then(latency_s, self.baseline_s)
        if self._settling:
            self._settle(now)
            return outcome
        if ticket < self._fence:
            return outcome
        window = self._window
        if (cohort := self._cohort_of(ticket)) is not None:
            cohort.back += 1
            cohort.count += 1
            cohort.rate_limited += rate_limited
        window.count += 1
        window.full += full
        window.first_issue = min(window.first_issue, now - latency_s)
        if rate_limited:
            window.rate_limited += 1
            window.rate_limited_s += latency_s
        else:
            window.answered.append(latency_s)
        if remaining is not None:
            allowed = flying + remaining
            window.allowed = allowed if window.allowed is None else min(window.allowed, allowed)
            window.exhausted = window.exhausted or remaining <= 0
        size = max(_MIN_WINDOW, min(self.limit, window.peak))
        if self._tested is not None:  # a window that tests a decrease runs until it can tell
            size = max(size, _MIN_VERDICT - self._tested.count)
        # A window lasts one healthy latency at least: shorter, it would see a burst's fast 429s
        # before the answers of the same calls. It closes early once its 429s alone are overload by
        # far (each further 429 beyond capacity sends a caller into its Retry-After sleep); a quota's
        # fast 429s come first too, but stay a fraction p / (1 - p) of the calls just issued. The
        # first window runs until answers come, or a flood of 429s (churn); the one after an unjudged
        # first one, also until the calls it judges are back (a cold start slows the first answers).
        if self._latency_s is None:
            lasted = len(window.answered) >= _MIN_SAMPLES or window.rate_limited >= (_FLOOD if window.answered else 1) * size
        else:
            lasted = now - window.opened >= self._latency_s or (self.windows == 0 and self._previous is not None and self._previous.tells())
        early = self.windows > 0 and window.rate_limited > (self._overloaded_share(size) + _EARLY) * size
        if (window.count >= size and lasted) or early:
            self._close(now, size)
        return outcome

    def _cohort_of(self, ticket: int) -> Cohort | None:
        if self._window.cohort.holds(ticket):
            return self._window.cohort
        previous = self._previous
        return previous if previous is not None and previous.holds(ticket) else None

    def _settle(self, now: float) -> None:
        """Open the window that tests a decrease once the calls issued before it are (nearly all) back.

        Until then the calls issued after it would tell only their fast 429s, not a fair share.
        """
        if self._settling and self._held <= _STRAGGLERS * (self._held + self._held_answered):
            self._settling = False
            self._window = self._open(now)

    def _judge(self, latency_s: float, rate_limited: bool) -> Outcome:
        if rate_limited:
            return "rate_limited"
        return "slow" if self._too_slow(latency_s) else "healthy"

    def _too_slow(self, latency_s: float) -> bool:
        slow_ms = self.config.slow_latency_ms
        if slow_ms is not None and latency_s * 1000 > slow_ms:
            return True
        baseline = self.baseline_s
        return baseline is not None and latency_s > self.config.latency_degrade_factor * baseline

    def _open(self, now: float) -> Window:
        return Window(opened=now, peak=self.in_flight, saturated=self.in_flight >= self.limit, cohort=Cohort(self._issued))

    def _close(self, now: float, size: int) -> None:
        window = self._window
        median = statistics.median(window.answered) if len(window.answered) >= _MIN_SAMPLES else None
        if median is not None:
            self._latency_s = median
        if self.baseline_s is None and median is not None:
            self.baseline_s = median  # the first measurement; judged from the next window on
        early = window.count < size
        n = max(window.count, size)
        share = window.rate_limited / n  # at least this, if it closed early
        previous, self._previous = self._previous, window.cohort
        window.cohort.end = self._issued
        if not self._started:
            self._started = True
            if median is not None and not early and share > _MARGIN:
                # answers came, so no churn, and 429s, maybe fast ones of a quota: the next window judges these calls
                self._window = self._open(now)
                return
        own, own_n = share, n
        if not early and previous is not None and previous.tells():
            share, n = previous.rate_limited / previous.count, previous.count
        self.windows += 1
        if self.windows == 1 and share <= _TRUSTED:
            self.background_share, self._reference_n = share, n  # the reference: the first cohort, at the lowest limit yet
        far = own > self._overloaded_share(own_n) + _FAR  # this window's own calls overload, whatever came before
        excess = far or share > self._overloaded_share(n)
        slow = median is not None and self._too_slow(median)
        tested, self._tested = self._tested, None
        if tested is None or not self._conclude(now, tested, window, share, median, excess=excess, slow=slow, early=early):
            if excess:
                # the last healthy limit where there is one: the exact figure follows a round trip later
                target = self._healthy_limit if self._healthy_limit is not None else holding(window, self.in_flight, now)
                if tested is not None and tested.cause == "rate_limited":
                    target = min(target, _TELL * (self._held + self._held_answered))
                self._decrease(now, "rate_limited", share, n, median, target, tested)
            elif slow:
                self._decrease(now, "slow", share, n, median, served(window, self.baseline_s, now), tested)
            elif window.exhausted:
                self._decrease(now, "exhausted", share, n, median, self.in_flight, tested)
            else:
                self._healthy(now, window, share, n, median)
        self._window = self._open(now)

    def _conclude(
        self, now: float, tested: Decrease, window: Window, share: float, median: float | None, *, excess: bool, slow: bool, early: bool
    ) -> bool:
        """Settle the decrease this window tested: undo it or correct it (True), or leave it (False)."""
        held = self._held + self._held_answered  # exact now: what the server held when it pushed back
        if tested.cause == "rate_limited" and excess:
            # the lower limit reached, 429s as frequent as before: they do not follow load. (Not so
            # when nearly all are 429s, or so many that the window closed early: then calls beyond
            # capacity churn through fast 429s, at any limit above it.)
            as_frequent = share >= tested.share - difference_noise(tested, share, window.count)
            # at a limit the server held, so none of these 429s were for capacity
            telling = self.limit <= _TELL * held and tested.count + window.count >= _MIN_VERDICT
            if telling and not early and window.saturated and share < 1 - _MARGIN and as_frequent:
                self.background_share = pooled(tested, share, window.count)
                self._reference_n = tested.count + window.count
                self._undo(now, tested)
                return True
            return False
        if tested.cause == "rate_limited" and not slow and not window.exhausted:
            if self.limit <= held:
                # a steady window (opened once the calls before it were back) at a limit the server
                # held: no 429 in it was for capacity, the cleanest reference there is
                self.background_share = share
            held_all = held >= _HELD_ALL * self._held_from and self._held_from >= _FILLED * tested.limit
            if tested.slow_start and held_all and tested.limit > tested.overloaded_at:
                # an alarm in slow start, the first at this level, yet the server held nearly every call
                # then in flight, and now no excess: the fast 429s of a doubling, or chance
                self._undo(now, tested)
                self._overloaded_at = tested.limit
            elif held > self.limit:
                self._set(now, min(round(held), tested.limit - 1))  # the decrease went below what the server held
            return True
        if tested.cause == "slow" and slow and self._slower_for_good(tested, median):
            # a window's answers left a latency before it closed, so one cut cannot tell: two can
            if tested.as_slow >= 1:
                self.baseline_s = median
                self._undo(now, tested)
                return True
            self._as_slow = True
        return False

    def _slower_for_good(self, tested: Decrease, median: float | None) -> bool:
        """After a latency decrease, whether answers stayed about as slow (the provider got slower).

        Only a decrease by a fifth or more can tell: a queueing server's latency falls with it.
        """
        if median is None or tested.median_s is None or self.limit > _NOT_FASTER * tested.limit:
            return False
        return median >= _NOT_FASTER * tested.median_s

    def _overloaded_share(self, n: int) -> float:
        """The share of 429s among ``n`` calls above which they are overload, not background or chance."""
        # all but one 429 in a small window is overload even against a high background share
        spread = noise(self.background_share, n)
        return min(self.background_share + _MARGIN + spread, 1 - 1 / n)

    def _undo(self, now: float, tested: Decrease) -> None:
        self._slow_start = tested.slow_start
        self._overloaded_at, self._backoff, self._wait = tested.overloaded_at, tested.backoff, 0
        self._set(now, tested.limit)

    def _decrease(
        self, now: float, cause: Cause, share: float, count: int, median: float | None, target: float | None, tested: Decrease | None
    ) -> None:
        self.decreases += 1
        limit = self.limit
        if cause != "exhausted":
            # a decrease right after one it tested extends it: an undo goes back to where both began
            first = tested or Decrease(cause, limit, self._slow_start, share, count, median, self._overloaded_at, self._backoff)
            as_slow = first.as_slow + 1 if self._as_slow else 0
            self._tested = replace(first, cause=cause, share=share, count=count, median_s=median, as_slow=as_slow)
        self._as_slow = False
        # overloaded again no higher than last time: the capacity has not grown, so probe it less often
        self._backoff = min(2 * self._backoff, _MAX_WAIT) if limit <= self._overloaded_at else 1
        self._overloaded_at = limit
        self._wait = self._backoff
        self._streak = 0
        self._slow_start = False
        self._fence = self._issued
        self._previous = None
        self._held, self._held_answered, self._held_from = self.in_flight, 0, self.in_flight
        self._settling = self._held > 0
        if target is None:
            target = limit / 2
        if cause != "rate_limited":
            target = max(target, self._healthy_limit or 0)
        self._healthy_limit = None
        self._set(now, max(1, math.ceil(_MIN_KEPT * limit), min(limit - 1, math.floor(target))))

    def _healthy(self, now: float, window: Window, share: float, n: int, median: float | None) -> None:
        if self._slow_start:
            # slow-start windows are compared with the share of those before pooled, at lower limits
            self.background_share, self._reference_n = weighted(self.background_share, self._reference_n, share, n)
        elif share < self.background_share:
            # never up here: a share that rises with the limit, however slowly, must not pass for background
            self.background_share += _LEARN * (share - self.background_share)
        if median is not None and self.baseline_s is not None and median < self.baseline_s:
            self.baseline_s += _LEARN * (median - self.baseline_s)
        if not in_use(window):
            return
        self._healthy_limit = self.limit
        if self._wait > 0:
            self._wait -= 1
            return
        if self._slow_start:
            grown = 2 * self.limit
        else:
            # the step doubles while growth goes on without a decrease: a limit left far below capacity
            # (a false alarm, capacity freed elsewhere) climbs back in a few windows, yet each probe
            # beyond a capacity just found is small
            step = min(_MAX_STEP * self.limit, _STEP * self.limit * 2**self._streak)
            grown = self.limit + max(1, round(step))
            self._streak += 1
        if window.allowed is not None:
            grown = min(grown, max(self.limit, window.allowed))
        self._set(now, grown)

    def _set(self, now: float, limit: int) -> None:
        if limit != self.limit:
            self.limit = limit
            self.history.append((now, limit))
