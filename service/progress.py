"""ProgressRecorder: a run's progress reports, written to its experiment record (on every status change, else throttled)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from engine.run_progress import RunProgress
from engine.run_status import LIVE_STATUSES, RunStatus
from service.registry import ExperimentRegistry

__all__ = ["ProgressRecorder"]


class ProgressRecorder:
    """Writes a run's progress to the registry: on every status change, else at most once per interval.

    Args:
        registry: where records live.
        experiment_id: the experiment being run.
        interval: the least time between two writes of the same status, in seconds.
        clock: a monotonic clock, in seconds.
        on_tick: called with every report whose ``ticks_done`` passed the previous report's (once per
            tick; the first report only sets where the run starts from).
        on_phase: called with every report whose phase differs from the previous report's (loading the
            model, creating workspaces, a tick, a questionnaire ...: a few per tick, not one per count).
    """

    def __init__(
        self,
        registry: ExperimentRegistry,
        experiment_id: str,
        *,
        interval: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
        on_tick: Callable[[RunProgress], None] | None = None,
        on_phase: Callable[[RunProgress], None] | None = None,
    ) -> None:
        self._registry = registry
        self._on_tick = on_tick
        self._on_phase = on_phase
        self._experiment_id = experiment_id
        self._interval = interval
        self._clock = clock
        self._latest: RunProgress | None = None
        self._last_status: str | None = None
        self._last_write = float("-inf")

    def __call__(self, progress: RunProgress) -> None:
        """Take one progress report from the runner; write it if it is due."""
        previous, self._latest = self._latest, progress
        if self._on_tick is not None and previous is not None and progress.ticks_done > previous.ticks_done:
            self._on_tick(progress)
        if self._on_phase is not None and progress.phase is not None and (previous is None or progress.phase != previous.phase):
            self._on_phase(progress)
        now = self._clock()
        if previous is not None and progress.phase != previous.phase:
            self._last_write = float("-inf")  # a new phase is written at once: GET shows what the run does now
        if progress.status == self._last_status and now - self._last_write < self._interval:
            return
        self._last_status, self._last_write = progress.status, now
        changes: dict[str, Any] = dict(self.counts())
        if progress.status in LIVE_STATUSES:
            changes["status"] = RunStatus.RUNNING
        if progress.error:
            changes["error"] = progress.error
        self._registry.update(self._experiment_id, **changes)

    def counts(self) -> dict[str, Any]:
        """The counters and phase of the latest report, written or not; empty before the first one."""
        if self._latest is None:
            return {}
        return {
            "phase": self._latest.phase,
            "ticks_done": self._latest.ticks_done,
            "ticks_total": self._latest.ticks_total,
            "agent_steps_done": self._latest.agent_steps_done,
            "agent_steps_total": self._latest.agent_steps_total,
            "llm_calls": self._latest.llm_calls,
            "tokens": self._latest.tokens,
        }
