"""Service-side computations (SQL queries, fidelity scorings): on threads of their own, bounded per owner and in all,
with a time limit and a cancel that the work itself checks.

A route that computes for long (seconds of DuckDB, minutes of bootstrap) must not run on the event loop, nor in the
thread pool that every plain ``def`` route shares: forty of one owner's scorings there would keep another owner's
dataset listing waiting. A :class:`ComputePool` gives one kind of computation a thread pool of its own with one
thread per slot of its :class:`~service.admission.limits.Slots`, so what is admitted starts at once and what is not
is refused (429) rather than queued. A thread cannot be killed: each computation gets a :class:`Deadline` and
calls :meth:`Deadline.check` between its steps; past the pool's time limit, or once its request was cancelled or
the service stops, the check raises and the work ends there. Its slot is held until the work has really ended,
not merely until its request stopped waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from service.admission.limits import Slots
from service.errors import TimeLimitError, WorkCancelledError
from service.memory import give_back_freed_memory

__all__ = ["ComputePool", "Deadline"]

T = TypeVar("T")


class Deadline:
    """When one computation must stop: past its time limit, or once cancelled. The work calls :meth:`check`.

    Args:
        what: the computation, for the messages (``"the fidelity scoring"``).
        time_limit: the seconds it may take and the setting that says so; None: no limit.
    """

    def __init__(self, what: str, time_limit: tuple[float, str] | None = None) -> None:
        self.what = what
        self.time_limit = time_limit
        self._ends = time.monotonic() + time_limit[0] if time_limit is not None else math.inf
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        """Make the next :meth:`check` stop the work (thread-safe)."""
        self._cancelled.set()

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called."""
        return self._cancelled.is_set()

    def check(self) -> None:
        """Return if the work may go on.

        Raises:
            WorkCancelledError: it was cancelled (503).
            TimeLimitError: it is past its time limit (422, naming the limit and its setting).
        """
        if self._cancelled.is_set():
            raise WorkCancelledError(f"{self.what} was cancelled: the request went away or the service is stopping")
        if time.monotonic() > self._ends:
            assert self.time_limit is not None
            seconds, setting = self.time_limit
            raise TimeLimitError(f"{self.what} ran past its {seconds:g} s time limit ({setting}) and was stopped")


class ComputePool:
    """One kind of computation on a bounded thread pool of its own, at most ``slots`` at once per owner and in all.

    Args:
        slots: how many one owner, and everyone, may run at once (it needs a total: the pool has that many threads).
        what: one computation, for the deadline's messages (``"the fidelity scoring"``).
        time_limit: the seconds one may take and the setting that says so; None: the work bounds itself.
    """

    def __init__(self, slots: Slots, what: str, time_limit: tuple[float, str] | None = None) -> None:
        if slots.total is None:
            raise ValueError(f"a ComputePool for {slots.what} needs a total cap: it has one thread per slot")
        self.slots = slots
        self.what = what
        self.time_limit = time_limit
        self._threads = ThreadPoolExecutor(max_workers=slots.total[0], thread_name_prefix="polis-compute")
        self._running: set[Deadline] = set()
        self._lock = threading.Lock()

    async def run(self, owner: str, work: Callable[[Deadline], T]) -> T:
        """Run ``work(deadline)`` on the pool's threads in one of ``owner``'s slots, and return what it returns.

        The slot is taken now (or refused) and given back when ``work`` has ended. If the caller stops waiting
        (its task is cancelled), the deadline is cancelled, so the work ends at its next check.

        Raises:
            TooManyRequestsError: ``owner``, or everyone, already runs as many as the slots allow (429).
            TimeLimitError: the work checked its deadline past the time limit.
            Exception: whatever ``work`` raises.
        """
        held = contextlib.ExitStack()
        held.enter_context(self.slots.hold(owner))
        deadline = Deadline(self.what, self.time_limit)

        def job() -> T:
            try:
                with held, self._tracked(deadline):
                    deadline.check()  # cancelled (the service stopping) before it started
                    return work(deadline)
            finally:
                give_back_freed_memory()  # a spec's table, a scoring's resamples: freed now, returned to the OS

        try:
            future = asyncio.get_running_loop().run_in_executor(self._threads, job)
        except BaseException:  # the pool is shut down: nothing will run, so nothing will give the slot back
            held.close()
            raise
        # A job cancelled before it ran (the pool shutting down) never reached its ``with held``.
        future.add_done_callback(lambda done: held.close() if done.cancelled() else None)
        try:
            # Shielded: a cancelled request must not cancel the future while the thread still runs the work.
            return await asyncio.shield(future)
        except asyncio.CancelledError:
            deadline.cancel()
            raise

    @contextlib.contextmanager
    def _tracked(self, deadline: Deadline) -> Iterator[None]:
        with self._lock:
            self._running.add(deadline)
        try:
            yield
        finally:
            with self._lock:
                self._running.discard(deadline)

    def shutdown(self) -> None:
        """Cancel every running computation (each ends at its next check) and take no more."""
        with self._lock:
            for deadline in self._running:
                deadline.cancel()
        self._threads.shutdown(wait=False, cancel_futures=True)
