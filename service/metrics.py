"""The service's metrics in the Prometheus text exposition format (version 0.0.4), written by hand.

Experiments by status, the queue length and the LLM usage come from the registry's records at
scrape time. The LLM counters sum the usage of runs that have reported it (a run reports it when it
ends), so deleting an experiment lowers them, which Prometheus reads as a counter reset. Tick
durations are the one thing the records do not hold: :meth:`ServiceMetrics.observe_tick` feeds a
histogram; :class:`TickTimer` turns a run's progress reports (its ``ticks_done``) into those calls.
"""

from __future__ import annotations

import bisect
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import get_args

from service.registry import ExperimentRecord
from service.schemas import ExperimentStatus

__all__ = ["CONTENT_TYPE", "TICK_BUCKETS", "HistogramSnapshot", "ServiceMetrics", "TickTimer", "exposition"]

#: The media type of the text exposition format.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: Upper bounds of the tick-duration buckets, in seconds (a tick is an LLM round for every agent).
TICK_BUCKETS: tuple[float, ...] = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)

_STATUSES: tuple[str, ...] = tuple(str(status) for status in get_args(ExperimentStatus))


@dataclass(frozen=True)
class HistogramSnapshot:
    """A histogram's state at one moment."""

    bounds: tuple[float, ...]  #: bucket upper bounds, ascending (``+Inf`` implied)
    counts: tuple[int, ...]  #: observations per bucket, not cumulative; one more than ``bounds`` (the ``+Inf`` bucket)
    total: float  #: sum of the observed values
    count: int  #: number of observations


class ServiceMetrics:
    """The metrics the service measures itself (the rest are read off the records).

    Args:
        tick_buckets: upper bounds of the tick-duration buckets, in seconds.

    Raises:
        ValueError: the bounds are empty, not ascending, or not finite.
    """

    def __init__(self, tick_buckets: tuple[float, ...] = TICK_BUCKETS) -> None:
        if not tick_buckets or list(tick_buckets) != sorted(set(tick_buckets)) or not all(map(math.isfinite, tick_buckets)):
            raise ValueError(f"bucket bounds must be finite, distinct and ascending, not {tick_buckets}")
        self._bounds = tick_buckets
        self._counts = [0] * (len(tick_buckets) + 1)
        self._sum = 0.0
        # Ticks may end on other threads (progress callbacks); one lock keeps count and sum together.
        self._lock = threading.Lock()

    def observe_tick(self, seconds: float) -> None:
        """Record the wall time of one finished tick.

        Args:
            seconds: how long the tick took; negative or non-finite values are refused.

        Raises:
            ValueError: ``seconds`` is negative or not finite.
        """
        if not math.isfinite(seconds) or seconds < 0:
            raise ValueError(f"a tick duration must be a finite number of seconds >= 0, not {seconds}")
        # Prometheus buckets are upper-inclusive: a value equal to a bound belongs to that bucket.
        index = bisect.bisect_left(self._bounds, seconds)
        with self._lock:
            self._counts[index] += 1
            self._sum += seconds

    def tick_durations(self) -> HistogramSnapshot:
        """The tick-duration histogram as it is now."""
        with self._lock:
            return HistogramSnapshot(self._bounds, tuple(self._counts), self._sum, sum(self._counts))


class TickTimer:
    """Times one run's ticks from its progress reports and feeds them to :meth:`ServiceMetrics.observe_tick`.

    The first report starts the clock; each later report whose ``ticks_done`` grew ends that many
    ticks, sharing the time since the previous growth evenly (reports may skip ticks).

    Args:
        metrics: where the durations go.
        clock: a monotonic clock, in seconds.
    """

    def __init__(self, metrics: ServiceMetrics, clock: Callable[[], float] = time.monotonic) -> None:
        self._metrics = metrics
        self._clock = clock
        self._ticks: int | None = None
        self._since = 0.0

    def __call__(self, ticks_done: int) -> None:
        """Take the ``ticks_done`` of one progress report."""
        now = self._clock()
        if self._ticks is None or ticks_done < self._ticks:  # the first report, or a resumed run counting anew
            self._ticks, self._since = ticks_done, now
            return
        ended = ticks_done - self._ticks
        if ended == 0:
            return
        for _ in range(ended):
            self._metrics.observe_tick((now - self._since) / ended)
        self._ticks, self._since = ticks_done, now


def exposition(records: Iterable[ExperimentRecord], metrics: ServiceMetrics) -> str:
    """The metrics page.

    Args:
        records: every experiment record (all owners).
        metrics: the service's own measurements.

    Returns:
        The page in the text exposition format, ending with a newline.
    """
    by_status = dict.fromkeys(_STATUSES, 0)
    calls = tokens_in = tokens_out = 0
    for record in records:
        by_status[str(record.status)] = by_status.get(str(record.status), 0) + 1
        calls += record.llm_calls or 0
        tokens_in += record.input_tokens or 0
        tokens_out += record.output_tokens or 0
    lines = _family("polis_experiments", "gauge", "Experiments by status.")
    lines += [f'polis_experiments{{status="{_label(status)}"}} {n}' for status, n in by_status.items()]
    lines += _family("polis_queue_length", "gauge", "Experiments waiting for a run slot.")
    lines.append(f"polis_queue_length {by_status.get('queued', 0)}")
    for name, value, what in (
        # Gauges, not counters: they sum the records the service holds, so deleting one lowers them.
        ("polis_llm_calls", calls, "LLM calls of the finished runs the service holds."),
        ("polis_llm_input_tokens", tokens_in, "LLM input tokens of the finished runs the service holds."),
        ("polis_llm_output_tokens", tokens_out, "LLM output tokens of the finished runs the service holds."),
    ):
        lines += _family(name, "gauge", what)
        lines.append(f"{name} {value}")
    lines += _histogram("polis_tick_duration_seconds", "Wall time of one tick.", metrics.tick_durations())
    return "\n".join(lines) + "\n"


def _family(name: str, kind: str, help_text: str) -> list[str]:
    return [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]


def _histogram(name: str, help_text: str, snapshot: HistogramSnapshot) -> list[str]:
    lines = _family(name, "histogram", help_text)
    cumulative = 0
    for bound, count in zip((*snapshot.bounds, math.inf), snapshot.counts, strict=True):
        cumulative += count
        lines.append(f'{name}_bucket{{le="{_number(bound)}"}} {cumulative}')
    lines.append(f"{name}_sum {_number(snapshot.total)}")
    lines.append(f"{name}_count {snapshot.count}")
    return lines


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf"
    return repr(float(value))


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
