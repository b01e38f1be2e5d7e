"""Submission: the service's one door into the engine's run machinery.

This is the only service module that imports ``engine.society``. It opens the shared Dask client,
queues experiments (:class:`service.queue.FairQueue`: a few slots, shared round-robin by owner),
starts each as an asyncio task on the service's loop when it gets a slot, turns the runner's
progress into registry writes (throttled) and live events (:mod:`service.events`), and on shutdown
cancels what still runs and marks it ``interrupted`` with ``resume_on_start``, so the next start
resumes it (experiments still queued stay ``queued`` and are queued again).

Forks: :func:`check_fork` plans one (the route calls it before registering anything); a record
with ``forked_from`` gets its run directory made from the parent's (:func:`make_fork`) when it first
takes a slot, then runs as a resume of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from engine.api import (
    SWEEP_FILE,
    BudgetSpec,
    ExperimentSpec,
    ForkSpec,
    RunSummary,
    SweepCell,
    check_as_of_kept,
    cluster_dashboard,
    completed_steps_at,
    experiment_page,
    extend_spec,
    find_fork_point,
    has_society_step,
    materialize_fork,
    open_shell,
    parse_spec,
    plan_fork,
    run_spec,
    run_store,
)
from engine.errors import ForkError, PolisError, SpecError, StorageError
from engine.run_progress import RunProgress
from engine.run_status import ENDED_STATUSES, RunStatus
from service.admission.auth import LOCAL_ADMIN, Principal
from service.admission.llm_usage import LlmCallLedger
from service.errors import ExperimentBusyError, ExperimentNotFoundError, ExperimentNotRunningError, SpecRejectedError
from service.events import EventHub
from service.memory import give_back_freed_memory
from service.metrics import ServiceMetrics, TickTimer
from service.progress import ProgressRecorder
from service.queue import FairQueue
from service.registry import ACTIVE_STATUSES, ExperimentRecord, ExperimentRegistry, utc_now
from service.schemas import ForkedFrom

__all__ = [
    "ProgressRecorder", "RunFunction", "Submitter", "check_as_of_kept", "check_fork", "cluster_dashboard", "experiment_page",
    "extend_spec", "make_fork", "open_shell",
]

logger = logging.getLogger(__name__)

#: The shape of ``engine.society.run.runner.run_experiment`` (``run_spec`` also runs sweeps); tests pass a fake of the same shape.
RunFunction = Callable[..., Awaitable[RunSummary]]

_SHUTDOWN_GRACE_S = 30.0


@dataclass(frozen=True)
class _Pending:
    """How a queued experiment is to be run once it gets its slot."""

    spec: ExperimentSpec
    resume: bool  #: continue the run in its run directory, if it holds one
    force: bool  #: resume although the spec differs from the run's (steps appended to a stored run)


def check_fork(parent: Path | str, at_step: int, patch: dict[str, Any] | None = None) -> ExperimentSpec:
    """The spec of a fork of the run in ``parent`` at its committed tick ``at_step`` (blocking: call it in a thread).

    Args:
        parent: the parent's run directory (a finished run).
        at_step: the parent's committed tick the fork starts from.
        patch: a JSON merge patch over the parent's spec (None: the same spec).

    Raises:
        SpecError: ``at_step`` outside the parent's ticks (path ``at_step``), or a patch that makes no
            valid fork (the spec's field path).
        SpecRejectedError: the parent no longer keeps that tick (``snapshots.keep``), or a driver holds
            it (path ``at_step``).
    """
    try:
        return plan_fork(parent, at_step, patch)[1].spec
    except ForkError as error:
        raise SpecRejectedError(str(error), path="at_step") from None


def make_fork(parent: Path | str, at_step: int, spec: ExperimentSpec, run_dir: Path | str) -> None:
    """Make ``run_dir`` the fork of ``parent`` at tick ``at_step`` running ``spec`` (from :func:`check_fork`), ready to resume.

    A directory a stopped service left half made (it has no status file yet) is made again.

    Raises:
        RunError: ``parent`` holds no run (a ``ForkError`` if it no longer keeps the tick or runs).
        OSError: the copy failed (e.g. the disk is full).
    """
    point = find_fork_point(parent, at_step)
    if not has_society_step(run_dir):
        if isinstance(run_dir, str):
            run_store(run_dir).delete_prefix("")
        elif run_dir.exists():
            shutil.rmtree(run_dir)
    # The spec is the one check_fork made against this parent; only the parent's future can have changed since.
    materialize_fork(point, ForkSpec(spec, at_step, completed_steps_at(spec, at_step)), run_dir)


class Submitter:
    """Queues experiments and runs them as tasks on the running event loop, sharing one Dask client.

    Args:
        registry: where records live.
        client: the shared asynchronous ``distributed.Client``.
        run: the run function; ``run_spec`` (a run or a sweep) unless a test passes a fake.
        progress_interval: the least time between two progress writes, in seconds.
        run_options: more keyword arguments for every run (e.g. ``llm_limits``).
        max_running: how many experiments run at once over all owners (``POLIS_MAX_RUNNING``).
        max_concurrent: the most experiments one owner runs at once (its quota); default ``max_running``.
        events: where live events go; a new hub unless given.
        metrics: where tick durations go (``GET /metrics``); new measurements unless given.
        llm_calls: where each owner's LLM calls today are counted; a new, unpersisted ledger unless given.
        daily_calls: the most LLM calls one owner makes a day (its quota): an experiment starts with a budget of what is
            left of it, or ends ``budget_exhausted`` at once when nothing is; and when the owner's calls reach it, the
            owner's running experiments are stopped and end ``budget_exhausted`` (resumable); None: no daily limit.
    """

    def __init__(
        self,
        registry: ExperimentRegistry,
        client: Any,
        *,
        run: RunFunction = run_spec,
        progress_interval: float = 0.5,
        run_options: dict[str, Any] | None = None,
        max_running: int = 2,
        max_concurrent: Callable[[str], int] | None = None,
        events: EventHub | None = None,
        metrics: ServiceMetrics | None = None,
        llm_calls: LlmCallLedger | None = None,
        daily_calls: Callable[[str], int] | None = None,
    ) -> None:
        self._registry = registry
        self._client = client
        self._run_fn = run
        self._run_options = run_options or {}
        self._progress_interval = progress_interval
        self.queue = FairQueue(max_running, max_concurrent or (lambda owner: max_running))  #: who runs next
        self.events = events if events is not None else EventHub()  #: every experiment's live events
        self.metrics = metrics if metrics is not None else ServiceMetrics()  #: tick durations of every run
        self.llm_calls = llm_calls if llm_calls is not None else LlmCallLedger()  #: each owner's LLM calls today
        self._daily_calls = daily_calls
        self._out_of_calls: set[str] = set()  # experiments stopped because their owner's daily calls ran out
        self._pending: dict[str, _Pending] = {}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._cell_waiters: dict[str, asyncio.Future[None]] = {}  # "<experiment id>/<cell id>" -> its slot, once granted
        self._closing = False

    def submit(
        self, record: ExperimentRecord, spec: ExperimentSpec, *, resume: bool = False, force: bool = False
    ) -> ExperimentRecord:
        """Queue an experiment; it starts when a slot frees. Must be called on the engine's event loop.

        Args:
            record: the experiment's record (new, or finished and to be continued).
            spec: the validated spec to run (the record's, or the record's with a raised budget or appended steps).
            resume: continue the run in the record's run directory from its last committed transaction
                (a run directory that holds no run yet is started afresh).
            force: resume although ``spec`` differs from the one the run was started with.

        Returns:
            The record as queued (its ``queued`` event published), before the run may take a slot.

        Raises:
            ExperimentBusyError: the experiment is queued or running already.
        """
        if record.id in self.queue or record.id in self._tasks:
            raise ExperimentBusyError(record.id, self._registry.get(record.id).status, "submit")
        queued = self._set(record.id, status=RunStatus.QUEUED, error=None, finished_at=None, cancel_requested=False)
        pending = _Pending(spec, resume, force)
        if spec.sweep is not None:
            # A sweep holds no slot itself: each of its cells queues for one (see _cell_slot).
            self._start(queued, pending)
            return queued
        self._pending[record.id] = pending
        self.queue.push(record.id, record.owner)
        self._dispatch()
        return queued

    def resume(self, experiment_id: str, caller: Principal = LOCAL_ADMIN, budget: BudgetSpec | None = None,
               run_options: Mapping[str, Any] | None = None) -> ExperimentRecord:
        """Queue a finished experiment again, to continue from its last committed transaction.

        Args:
            experiment_id: the experiment.
            caller: who asks (another owner's experiment is not found).
            budget: a new budget (e.g. a raised one for a ``budget_exhausted`` run); None keeps the spec's.
            run_options: run options to change (``batch_size``, ``max_workers``: :class:`~engine.spec.RunOptions`).

        Returns:
            The record, ``queued`` again.

        Raises:
            ExperimentNotFoundError: no such experiment that ``caller`` may see.
            ExperimentBusyError: it is queued or running.
            SpecError: the stored spec with the new budget does not validate.
        """
        record = self._registry.get(experiment_id, caller)
        if record.status in ACTIVE_STATUSES:
            raise ExperimentBusyError(experiment_id, record.status, "resume")
        if budget is not None or run_options:
            changes = {"budget": budget.model_dump(mode="json")} if budget is not None else {}
            spec = parse_spec({**self._registry.spec(experiment_id), **changes, **(run_options or {})})
            self._registry.set_spec(experiment_id, spec)
        else:
            spec = parse_spec(self._registry.spec(experiment_id))
        return self.submit(record, spec, resume=True)

    def adopt(self) -> list[str]:
        """Queue every ``queued`` record, oldest first (at start-up: what the last process left waiting or running).

        Returns:
            The ids queued. A record whose stored spec no longer validates is marked ``failed`` instead.
        """
        waiting = sorted((r for r in self._registry.records() if r.status == RunStatus.QUEUED), key=lambda r: r.created_at)
        adopted = []
        for record in waiting:
            try:
                spec = parse_spec(self._registry.spec(record.id))
            except (SpecError, StorageError) as error:
                self._set(record.id, status=RunStatus.FAILED, finished_at=utc_now(), error=f"cannot resume: {error}")
                continue
            # The stored spec is the service's own; it differs from the run's only by what this API changed.
            self.submit(record, spec, resume=True, force=True)
            adopted.append(record.id)
        return adopted

    def active(self) -> list[str]:
        """Ids of the experiments whose tasks have not finished (the running ones)."""
        return list(self._tasks)

    def queued(self) -> list[str]:
        """Ids of the experiments waiting for a slot, in arrival order (sweeps' cells waiting for one are not listed)."""
        return [key for key in self.queue.waiting() if key not in self._cell_waiters]

    def cancel(self, experiment_id: str) -> None:
        """Stop an experiment: a queued one leaves the queue, a running one is cancelled; both end ``cancelled``.

        Raises:
            ExperimentNotFoundError: no such experiment.
            ExperimentNotRunningError: the experiment has already finished.
        """
        if self.queue.remove(experiment_id):
            self._pending.pop(experiment_id, None)
            self._set(experiment_id, status=RunStatus.CANCELLED, finished_at=utc_now(), error="cancelled before it started")
            return
        task = self._tasks.get(experiment_id)
        if task is None or task.done():
            raise ExperimentNotRunningError(experiment_id, self._registry.get(experiment_id).status)
        # Recorded before the run unwinds: a restart meanwhile ends it cancelled instead of resuming it.
        self._registry.update(experiment_id, cancel_requested=True)
        task.cancel()

    async def shutdown(self, grace_s: float = _SHUTDOWN_GRACE_S) -> None:
        """Start nothing more; cancel every running experiment, wait for them to stop, and mark them
        ``interrupted`` with ``resume_on_start`` (queued ones stay ``queued``).

        Args:
            grace_s: how long to wait for cancelled runs to unwind.
        """
        self._closing = True
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.wait(tasks, timeout=grace_s)
        for experiment_id in list(self._tasks):
            # Still unwinding after the grace period: the record must not claim it runs.
            logger.warning("experiment %s did not stop within %.0f s of shutdown", experiment_id, grace_s)
            self._mark_stopped(experiment_id, {})

    def _dispatch(self) -> None:
        if self._closing:
            return
        for key in self.queue.take():
            if (granted := self._cell_waiters.get(key)) is not None:
                if not granted.done():
                    granted.set_result(None)
                continue
            self._start(self._registry.get(key), self._pending.pop(key))

    def _start(self, record: ExperimentRecord, pending: _Pending) -> None:
        task = asyncio.get_running_loop().create_task(self._run(record, pending), name=f"polis-experiment-{record.id}")
        self._tasks[record.id] = task
        task.add_done_callback(partial(self._on_done, record.id))

    @contextlib.asynccontextmanager
    async def _cell_slot(self, record: ExperimentRecord, cell: SweepCell) -> AsyncIterator[None]:
        """Wait in the fair queue for a slot for one cell of a sweep (as its owner), hold it while the cell runs."""
        key = f"{record.id}/{cell.cell_id}"
        granted = asyncio.get_running_loop().create_future()
        self._cell_waiters[key] = granted
        self.queue.push(key, record.owner)
        try:
            self._dispatch()
            await granted
            if self._registry.get(record.id).status == RunStatus.QUEUED:
                self._set(record.id, status=RunStatus.RUNNING, started_at=utc_now())
            yield
        finally:
            del self._cell_waiters[key]
            if not self.queue.remove(key):
                self.queue.finish(key)
            self._dispatch()

    def _set(self, experiment_id: str, **changes: Any) -> ExperimentRecord:
        """Update a record, and publish its status (and final) event when the status changed."""
        before = self._registry.get(experiment_id)
        self.events.open(before)
        after = self._registry.update(experiment_id, **changes)
        if after.status != before.status:
            self.events.status_changed(after)
        return after

    async def _run(self, record: ExperimentRecord, pending: _Pending) -> None:
        experiment_id, run_dir = record.id, record.run_dir
        recorder = ProgressRecorder(self._registry, experiment_id, interval=self._progress_interval,
                                    on_tick=lambda progress: self.events.tick(experiment_id, progress.to_json()),
                                    on_phase=lambda progress: self.events.phase(experiment_id, progress.to_json()))
        timer = TickTimer(self.metrics)
        counted = record.llm_calls or 0  # the run's calls are cumulative over its attempts; earlier ones were counted

        def count_calls(total: int) -> None:
            nonlocal counted
            if total > counted:
                self.llm_calls.add(record.owner, total - counted)
                counted = total
                self._stop_when_out_of_calls(record.owner)

        def on_progress(progress: RunProgress) -> None:
            timer(progress.ticks_done)
            count_calls(progress.llm_calls)
            recorder(progress)

        options: dict[str, Any] = {**self._run_options, "experiment_id": experiment_id}  # its span and task keys on the dashboard
        if pending.spec.sweep is not None:
            options["cell_slot"] = partial(self._cell_slot, record)  # running once its first cell has a slot
        else:
            self._set(experiment_id, status=RunStatus.RUNNING, started_at=utc_now())
        if record.forked_from is not None and not _holds_run(run_dir, pending.spec):
            try:
                await self._make_fork(record.forked_from, pending.spec, run_dir)
            except asyncio.CancelledError:
                self._mark_stopped(experiment_id, {})
                raise
            # The parent was deleted, runs again or no longer keeps the tick since the fork was checked; or the disk is full.
            except (ExperimentNotFoundError, PolisError, OSError) as error:
                self._set(experiment_id, status=RunStatus.FAILED, finished_at=utc_now(), error=f"cannot make the fork: {error}")
                return
        if pending.resume and _holds_run(run_dir, pending.spec):
            options.update(resume=True, force=pending.force)
        spec = self._within_daily_calls(record, pending.spec)
        if spec is None:
            return
        try:
            summary = await self._run_fn(spec, run_dir, self._client, on_progress=on_progress, **options)
        except asyncio.CancelledError:
            self._mark_stopped(experiment_id, recorder.counts())
            raise
        except Exception as error:  # run_experiment reports run failures itself; this is a bug
            logger.exception("run_experiment raised for experiment %s", experiment_id)
            self._set(
                experiment_id,
                **recorder.counts(),
                status=RunStatus.FAILED,
                finished_at=utc_now(),
                error=f"internal error: {type(error).__name__}: {error}",
            )
            return
        count_calls(summary.llm_calls)
        self._set(experiment_id, **{**recorder.counts(), **_summary_fields(summary)})

    def _within_daily_calls(self, record: ExperimentRecord, spec: ExperimentSpec) -> ExperimentSpec | None:
        """``spec`` with its budget capped to the calls its owner has left today; None, and the experiment ended
        ``budget_exhausted``, when none are left. A sweep is not capped (its budget is each cell's): it is stopped
        when the owner's calls run out (:meth:`_stop_when_out_of_calls`), as the owner's other experiments are."""
        if self._daily_calls is None or spec.sweep is not None:
            return spec
        left = self.llm_calls.left(record.owner, self._daily_calls(record.owner))
        if left <= 0:
            self._set(record.id, status=RunStatus.BUDGET_EXHAUSTED, finished_at=utc_now(),
                      error=self._out_of_calls_message(record.owner))
            return None
        cap = (record.llm_calls or 0) + left  # a budget counts the run's calls over all its attempts
        budget = spec.budget or BudgetSpec()
        if budget.max_calls is not None and budget.max_calls <= cap:
            return spec
        return spec.model_copy(update={"budget": budget.model_copy(update={"max_calls": cap})})

    def _stop_when_out_of_calls(self, owner: str) -> None:
        """Stop every running experiment of ``owner``'s once the owner's calls today reach the daily limit: each ends
        ``budget_exhausted`` at its last committed tick, and can be resumed tomorrow (or with a raised quota)."""
        if self._daily_calls is None or self.llm_calls.left(owner, self._daily_calls(owner)) > 0:
            return
        for experiment_id, task in self._tasks.items():
            if experiment_id not in self._out_of_calls and not task.done() and self._registry.get(experiment_id).owner == owner:
                self._out_of_calls.add(experiment_id)
                task.cancel()

    def _out_of_calls_message(self, owner: str) -> str:
        limit = self._daily_calls(owner) if self._daily_calls is not None else 0
        return (f"owner {owner!r} has no LLM calls left today (quota max_llm_calls_per_day: {limit}); resume it after "
                "00:00 UTC")

    async def _make_fork(self, origin: ForkedFrom, spec: ExperimentSpec, run_dir: Path | str) -> None:
        parent = self._registry.get(origin.experiment).run_dir
        copy = asyncio.ensure_future(asyncio.to_thread(make_fork, parent, origin.at_step, spec, run_dir))
        try:
            await asyncio.shield(copy)
        except asyncio.CancelledError:
            # A thread cannot be stopped: let the copy end, so no later attempt (resume, restart) races it.
            await asyncio.wait([copy])
            raise

    def _mark_stopped(self, experiment_id: str, counts: dict[str, int]) -> None:
        if self._registry.get(experiment_id).status not in ACTIVE_STATUSES:
            return
        changes: dict[str, Any] = {**counts, "finished_at": utc_now()}
        record = self._registry.get(experiment_id)
        if record.cancel_requested:
            changes.update(status=RunStatus.CANCELLED, error="cancelled on request")
        elif experiment_id in self._out_of_calls:
            changes.update(status=RunStatus.BUDGET_EXHAUSTED, error=self._out_of_calls_message(record.owner))
        else:
            changes.update(status=RunStatus.INTERRUPTED, resume_on_start=True,
                           error="the service shut down while this experiment was running; it resumes when the service starts again")
        self._set(experiment_id, **changes)

    def _on_done(self, experiment_id: str, task: asyncio.Task[None]) -> None:
        self._out_of_calls.discard(experiment_id)
        if task.cancelled():
            # Cancelled before its first step never reached _run's handler.
            self._mark_stopped(experiment_id, {})
        elif (error := task.exception()) is not None:
            logger.error("experiment task %s failed", experiment_id, exc_info=error)
            if self._registry.get(experiment_id).status in ACTIVE_STATUSES:
                message = f"internal error: {type(error).__name__}: {error}"
                self._set(experiment_id, status=RunStatus.FAILED, finished_at=utc_now(), error=message)
        self._tasks.pop(experiment_id, None)
        self.queue.finish(experiment_id)
        give_back_freed_memory()  # the run's spec and its members are freed now
        self._dispatch()


def _holds_run(run_dir: Path | str, spec: ExperimentSpec) -> bool:
    """Whether ``run_dir`` holds a run (or sweep) of ``spec``'s kind that a resume can continue."""
    if spec.sweep is not None:
        return isinstance(run_dir, Path) and (run_dir / SWEEP_FILE).exists()
    return has_society_step(run_dir)


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
