"""Where a run (or a service experiment) stands: the one definition of every status value.

The engine writes these into ``SOCIETY_STEP.json``, ``SWEEP.json`` and its progress reports; the
CLI prints them; the service stores them in its experiment records. The JSON value of each member
is its string. This module imports nothing of the engine, so storage, the CLI and the service can
use it without loading society code.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["ENDED_STATUSES", "LIVE_STATUSES", "RunStatus", "is_finished"]


class RunStatus(StrEnum):
    """Where a run stands (``SOCIETY_STEP.json``'s ``status``, the run summary's, a sweep cell's, an experiment's)."""

    QUEUED = "queued"  #: a service experiment registered but not started yet (service only)
    PENDING = "pending"  #: a sweep cell not started yet (sweep manifest only)
    STARTING = "starting"  #: the driver is setting up (progress reports only)
    RUNNING = "running"
    COMPLETED = "completed"  #: every step ran and no agent-step ended in error
    COMPLETED_WITH_ERRORS = "completed_with_errors"  #: every step ran; some agent-steps ended in error, within max_error_rate
    FAILED = "failed"  #: a crash, a refusal, errors past max_error_rate, or rows missing
    CANCELLED = "cancelled"  #: stopped by a signal or a cancel request; resumable
    BUDGET_EXHAUSTED = "budget_exhausted"  #: the LLM budget ran out; resumable with more
    CRASHED = "crashed"  #: the status says running but the driver's lease is dead (read side only)
    INTERRUPTED = "interrupted"  #: the service stopped while the experiment ran (service only)


#: A driver is working on the run (what a progress line keeps overwriting).
LIVE_STATUSES: frozenset[RunStatus] = frozenset({RunStatus.STARTING, RunStatus.RUNNING})
#: How a run driven by ``run_experiment`` ends.
ENDED_STATUSES: frozenset[RunStatus] = frozenset({
    RunStatus.COMPLETED, RunStatus.COMPLETED_WITH_ERRORS, RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.BUDGET_EXHAUSTED,
})


def is_finished(status: str) -> bool:
    """Every step of the run ran (with or without agent errors within ``max_error_rate``)."""
    return status in (RunStatus.COMPLETED, RunStatus.COMPLETED_WITH_ERRORS)
