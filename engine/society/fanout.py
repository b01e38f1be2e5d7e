"""Fan a transaction's batch jobs out over the cluster, at most ``limit`` futures in flight.

On a failure (or when ``stop()`` turns true, e.g. the env actor was lost) no new job starts and the
jobs in flight are waited for before the first error is raised, so no task of a failed attempt
outlives it and races its re-run. Cancelled (SIGINT, a REST cancel), it cancels what is in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from distributed import Client, as_completed

__all__ = ["fan_out"]

J = TypeVar("J")


async def fan_out(
    client: Client,
    jobs: Sequence[J],
    submit: Callable[[J], Any],
    *,
    limit: int | None = None,
    on_result: Callable[[Any], None] | None = None,
    stop: Callable[[], BaseException | None] = lambda: None,
) -> list[Any]:
    """Run ``submit(job)`` futures for every job; returns their results in completion order.

    Args:
        client: the asynchronous Client the futures belong to.
        jobs: what to run.
        submit: makes one job's future (with its explicit key).
        limit: futures in flight at once (None: all).
        on_result: called with each result as it arrives.
        stop: checked after each result; an exception it returns ends the fan-out like a failure.

    Raises:
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

    try:
        for _ in range(min(limit or len(pending), len(pending))):
            start()
        async for future in running:
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
    except asyncio.CancelledError:
        await client.cancel(inflight)
        raise
    failure = failure or stop()
    if failure is not None:
        raise failure
    return results
