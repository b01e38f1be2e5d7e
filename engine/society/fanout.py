"""Fan a transaction's batch jobs out over the cluster, at most ``limit`` futures in flight.

On a failure (or when ``stop()`` turns true, e.g. the env actor was lost) no new job starts and the
jobs in flight are waited for before the first error is raised, so no task of a failed attempt
outlives it and races its re-run. Cancelled (SIGINT, a REST cancel), it cancels what is in flight.

No future waits forever: when none of the futures in flight has started on a worker for
``start_timeout_s`` (the cluster lost all its workers, or no worker has the resources a task asks
for), the fan-out cancels them and raises :class:`TaskStallError` naming the cause. A batch that
runs on a worker for hours is fine, and so is one queued behind other work on a busy cluster.
:class:`StartWatch` holds that rule without IO; the poll that feeds it is the Dask shell.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from distributed import Client, as_completed

from engine.errors import TaskStallError

__all__ = ["START_TIMEOUT_S", "StartWatch", "fan_out", "task_slots"]

J = TypeVar("J")

#: How long futures may wait in flight with none of them started on a worker (seconds).
START_TIMEOUT_S = 300.0

#: Scheduler task states that mean a worker took the task (``memory``/``erred``: its result is on the way).
_STARTED = frozenset({"processing", "memory", "erred"})
#: States of a task that waits its turn; it is fine while the cluster is busy with other work.
_WAITING_TURN = frozenset({"queued", "waiting"})


async def task_slots(client: Client, limit: int | None = None) -> int:
    """How many batch futures the cluster runs at once now: its workers' threads, at most ``limit`` (at least 1)."""
    slots = sum((await client.nthreads()).values())
    return max(1, slots if limit is None else min(slots, limit))


class StartWatch:
    """When have the futures in flight waited too long for any worker to start one? (sans-IO)

    Progress is a result arriving, or a look at the scheduler that finds one of the keys in flight
    taken by a worker, or waiting its turn while the workers process other tasks.

    Args:
        timeout_s: how long the keys in flight may go without progress.
        now: the current (monotonic) time.
    """

    def __init__(self, timeout_s: float, now: float) -> None:
        self.timeout_s = timeout_s
        self._since = now
        self._states: dict[str, str | None] = {}
        self._workers: int | None = None

    def progressed(self, now: float) -> None:
        """A result arrived."""
        self._since = now

    def observe(self, now: float, states: Mapping[str, str | None], processing: Mapping[str, Iterable[Any]]) -> None:
        """Feed one look at the scheduler.

        Args:
            now: the current time.
            states: the scheduler's state of each key in flight (None: it does not know the key).
            processing: the keys each worker is processing (every worker of the cluster).
        """
        self._states, self._workers = dict(states), len(processing)
        busy = any(True for keys in processing.values() for _ in keys)
        if any(s in _STARTED or (busy and s in _WAITING_TURN) for s in states.values()):
            self._since = now

    def overdue(self, now: float) -> bool:
        """True once the keys in flight have gone ``timeout_s`` without progress."""
        return now - self._since >= self.timeout_s

    def cause(self) -> str:
        """Why no worker starts them, from the last look at the scheduler."""
        keys = sorted(self._states)
        head = (f"no worker started task {keys[0]}" if len(keys) == 1
                else f"no worker started any of the {len(keys)} tasks in flight (e.g. {keys[0] if keys else '?'})")
        head += f" within {self.timeout_s:g} s"
        states = sorted({str(s) for s in self._states.values()})
        them, their = ("it", "its") if len(keys) == 1 else ("them", "their")
        if self._workers == 0:
            return f"{head}: the cluster has 0 workers"
        if states == ["no-worker"]:
            return (f"{head}: the scheduler holds {them} as 'no-worker', so none of its {self._workers} workers meets "
                    f"{their} restrictions or resources")
        if states == ["None"]:
            return f"{head}: the scheduler does not know {them} (lost, or never received)"
        return f"{head}: {their} state on the scheduler is {', '.join(states)} with {self._workers} idle workers"


async def fan_out(
    client: Client,
    jobs: Sequence[J],
    submit: Callable[[J], Any],
    *,
    limit: int | None = None,
    on_result: Callable[[Any], None] | None = None,
    stop: Callable[[], BaseException | None] = lambda: None,
    start_timeout_s: float = START_TIMEOUT_S,
) -> list[Any]:
    """Run ``submit(job)`` futures for every job; returns their results in completion order.

    Args:
        client: the asynchronous Client the futures belong to.
        jobs: what to run.
        submit: makes one job's future (with its explicit key).
        limit: futures in flight at once (None: all).
        on_result: called with each result as it arrives.
        stop: checked after each result; an exception it returns ends the fan-out like a failure.
        start_timeout_s: how long futures may be in flight with none started on a worker.

    Raises:
        TaskStallError: no future in flight was started within ``start_timeout_s`` (they are cancelled).
        Exception: the first job's error (or ``stop()``'s), once nothing is in flight.
    """
    pending = list(jobs)
    inflight: list[Any] = []
    results: list[Any] = []
    failure: BaseException | None = None
    running = as_completed([])

    def start() -> None:
        future = submit(pending.pop(0))
        inflight.append(future)
        running.add(future)

    watch = StartWatch(start_timeout_s, time.monotonic())

    async def drain() -> None:
        nonlocal failure
        async for future in running:
            watch.progressed(time.monotonic())
            inflight.remove(future)
            try:
                result = await future
            except Exception as error:  # noqa: BLE001 - raised once the jobs in flight are done
                failure = failure or error
                continue
            results.append(result)
            if on_result is not None:
                on_result(result)
            failure = failure or stop()
            if pending and failure is None:
                start()

    async def guard() -> None:
        poll_s = min(5.0, start_timeout_s / 10)
        while True:
            await asyncio.sleep(poll_s)
            keys = [future.key for future in inflight]
            if not keys:
                continue
            assert client.scheduler is not None  # a started client has its scheduler rpc
            states = await client.scheduler.get_task_status(keys=keys)
            processing = await client.processing()
            now = time.monotonic()
            watch.observe(now, {str(k): v for k, v in states.items()}, processing)
            if watch.overdue(now):
                raise TaskStallError(watch.cause())

    tasks: list[asyncio.Task[None]] = []
    try:
        for _ in range(min(limit or len(pending), len(pending))):
            start()
        drainer, guarder = asyncio.ensure_future(drain()), asyncio.ensure_future(guard())
        tasks = [drainer, guarder]
        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        if not drainer.done():
            drainer.cancel()
            await client.cancel(inflight)
            guarder.result()  # raises TaskStallError (or the error of its look at the scheduler)
        drainer.result()
    except asyncio.CancelledError:
        await client.cancel(inflight)
        raise
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)  # their errors are raised above, once
    failure = failure or stop()
    if failure is not None:
        raise failure
    return results
