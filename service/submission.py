"""Submission: the service's one door into the engine's run machinery.

This is the only service module that imports ``engine.society``. It opens the shared Dask client,
starts ``run_experiment`` as an asyncio task on the service's loop, turns the runner's progress
into registry writes (throttled), and on shutdown cancels what still runs and marks it
``interrupted``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

from engine.run_status import ENDED_STATUSES, LIVE_STATUSES, RunStatus
from engine.society.run.cluster import open_client
from engine.society.run.runner import RunProgress, RunSummary
from engine.society.run.sweep import run_spec
from engine.spec import ExperimentSpec
from service.errors import ExperimentNotRunningError
from service.registry import ACTIVE_STATUSES, ExperimentRecord, ExperimentRegistry, utc_now

__all__ = ["ProgressRecorder", "RunFunction", "Submitter", "open_client"]

logger = logging.getLogger(__name__)

#: The shape of ``engine.society.run.runner.run_experiment`` (``run_spec`` also runs sweeps); tests pass a fake of the same shape.
RunFunction = Callable[..., Awaitable[RunSummary]]

_SHUTDOWN_GRACE_S = 30.0


class ProgressRecorder:
    """Writes a run's progress to the registry: on every status change, else at most once per interval.

    Args:
        registry: where records live.
        experiment_id: the experiment being run.
        interval: the least time between two writes of the same status, in seconds.
        clock: a monotonic clock, in seconds.
    """

    def __init__(
        self,
        registry: ExperimentRegistry,
        experiment_id: str,
        *,
        interval: float = 0.5,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._registry = registry
        self._experiment_id = experiment_id
        self._interval = interval
        self._clock = clock
        self._latest: RunProgress | None = None
        self._last_status: str | None = None
        self._last_write = float("-inf")

    def __call__(self, progress: RunProgress) -> None:
        """Take one progress report from the runner; write it if it is due."""
        self._latest = progress
        now = self._clock()
        if progress.status == self._last_status and now - self._last_write < self._interval:
            return
        self._last_status, self._last_write = progress.status, now
        changes: dict[str, Any] = dict(self.counts())
        if progress.status in LIVE_STATUSES:
            changes["status"] = RunStatus.RUNNING
        if progress.error:
            changes["error"] = progress.error
        self._registry.update(self._experiment_id, **changes)

    def counts(self) -> dict[str, int]:
        """The counters of the latest report, written or not; empty before the first one."""
        if self._latest is None:
            return {}
        return {
            "ticks_done": self._latest.ticks_done,
            "ticks_total": self._latest.ticks_total,
            "agent_steps_done": self._latest.agent_steps_done,
            "agent_steps_total": self._latest.agent_steps_total,
        }


class Submitter:
    """Runs experiments as tasks on the running event loop, sharing one Dask client.

    Args:
        registry: where records live.
        client: the shared asynchronous ``distributed.Client``.
        run: the run function; ``run_spec`` (a run or a sweep) unless a test passes a fake.
        progress_interval: the least time between two progress writes, in seconds.
        run_options: more keyword arguments for every run (e.g. ``llm_limits``).
    """

    def __init__(
        self,
        registry: ExperimentRegistry,
        client: Any,
        *,
        run: RunFunction = run_spec,
        progress_interval: float = 0.5,
        run_options: dict[str, Any] | None = None,
    ) -> None:
        self._registry = registry
        self._client = client
        self._run_fn = run
        self._run_options = run_options or {}
        self._progress_interval = progress_interval
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._cancel_requested: set[str] = set()

    def submit(self, record: ExperimentRecord, spec: ExperimentSpec, *, resume: bool = False, force: bool = False) -> None:
        """Start running a registered experiment. Must be called on the service's event loop.

        Args:
            record: the experiment's record, as created by the registry.
            spec: the validated spec the record was created from.
            resume: continue the run already in the record's run directory.
            force: resume even though the spec changed.
        """
        task = asyncio.get_running_loop().create_task(
            self._run(record.id, spec, record.run_dir, resume=resume, force=force), name=f"polis-experiment-{record.id}"
        )
        self._tasks[record.id] = task
        task.add_done_callback(partial(self._on_done, record.id))

    def active(self) -> list[str]:
        """Ids of the experiments whose tasks have not finished."""
        return list(self._tasks)

    def cancel(self, experiment_id: str) -> None:
        """Ask a running experiment to stop; it ends ``cancelled``.

        Raises:
            ExperimentNotFoundError: no such experiment.
            ExperimentNotRunningError: the experiment has already finished.
        """
        task = self._tasks.get(experiment_id)
        if task is None or task.done():
            raise ExperimentNotRunningError(experiment_id, self._registry.get(experiment_id).status)
        self._cancel_requested.add(experiment_id)
        task.cancel()

    async def shutdown(self, grace_s: float = _SHUTDOWN_GRACE_S) -> None:
        """Cancel every running experiment, wait for them to stop, and mark them ``interrupted``.

        Args:
            grace_s: how long to wait for cancelled runs to unwind.
        """
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=grace_s)
        for experiment_id in list(self._tasks):
            # Still unwinding after the grace period: the record must not claim it runs.
            logger.warning("experiment %s did not stop within %.0f s of shutdown", experiment_id, grace_s)
            self._mark_stopped(experiment_id, {})

    async def _run(self, experiment_id: str, spec: ExperimentSpec, run_dir: Path, *, resume: bool, force: bool) -> None:
        recorder = ProgressRecorder(self._registry, experiment_id, interval=self._progress_interval)
        self._registry.update(experiment_id, status=RunStatus.RUNNING, started_at=utc_now())
        try:
            # A plain submit calls the run function as before; resume and force only when asked for.
            again = {"resume": resume, "force": force} if resume or force else {}
            summary = await self._run_fn(spec, run_dir, self._client, on_progress=recorder, **again, **self._run_options)
        except asyncio.CancelledError:
            self._mark_stopped(experiment_id, recorder.counts())
            raise
        except Exception as error:  # run_experiment reports run failures itself; this is a bug
            logger.exception("run_experiment raised for experiment %s", experiment_id)
            self._registry.update(
                experiment_id,
                **recorder.counts(),
                status=RunStatus.FAILED,
                finished_at=utc_now(),
                error=f"internal error: {type(error).__name__}: {error}",
            )
            return
        self._registry.update(experiment_id, **{**recorder.counts(), **_summary_fields(summary)})

    def _mark_stopped(self, experiment_id: str, counts: dict[str, int]) -> None:
        if self._registry.get(experiment_id).status not in ACTIVE_STATUSES:
            return
        if experiment_id in self._cancel_requested:
            status, error = RunStatus.CANCELLED, "cancelled on request"
        else:
            status, error = RunStatus.INTERRUPTED, "the service shut down while this experiment was running"
        self._registry.update(experiment_id, **counts, status=status, finished_at=utc_now(), error=error)

    def _on_done(self, experiment_id: str, task: asyncio.Task[None]) -> None:
        if self._tasks.get(experiment_id) is not task:
            # A later run of the same experiment (steps, resume) owns the record and the slot now.
            if not task.cancelled() and (error := task.exception()) is not None:
                logger.error("an earlier task of experiment %s failed", experiment_id, exc_info=error)
            return
        if task.cancelled():
            # Cancelled before its first step never reached _run's handler.
            self._mark_stopped(experiment_id, {})
        elif (error := task.exception()) is not None:
            logger.error("experiment task %s failed", experiment_id, exc_info=error)
            if self._registry.get(experiment_id).status in ACTIVE_STATUSES:
                message = f"internal error: {type(error).__name__}: {error}"
                self._registry.update(experiment_id, status=RunStatus.FAILED, finished_at=utc_now(), error=message)
        self._tasks.pop(experiment_id, None)
        self._cancel_requested.discard(experiment_id)


def _summary_fields(summary: RunSummary) -> dict[str, Any]:
    fields: dict[str, Any] = {
        "status": summary.status,
        "ticks_done": summary.ticks_done,
        "agent_steps_done": summary.agent_steps,
        "llm_calls": summary.llm_calls,
        "input_tokens": summary.input_tokens,
        "output_tokens": summary.output_tokens,
        "duration_s": summary.duration_s,
        "error": summary.error,
        "finished_at": utc_now(),
    }
    if summary.status not in ENDED_STATUSES:
        fields["status"] = RunStatus.FAILED
        fields["error"] = f"the runner ended with unknown status {summary.status!r}: {summary.error}"
    return fields
