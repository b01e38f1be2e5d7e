"""A heartbeat while the driver waits on something long and silent (a local model loading): its elapsed seconds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

__all__ = ["with_heartbeat"]

T = TypeVar("T")


async def with_heartbeat(work: Awaitable[T], beat: Callable[[float], None], *, every_s: float = 1.0,
                         clock: Callable[[], float] = time.monotonic) -> T:
    """Await ``work``, calling ``beat`` with the seconds it has taken so far every ``every_s`` while it runs.

    Args:
        work: what to wait for (cancelled with the caller).
        beat: hears the elapsed seconds (not called when ``work`` ends within the first ``every_s``).
        every_s: the time between two beats.
        clock: a monotonic clock, in seconds.

    Returns:
        What ``work`` returns (or raises).
    """
    started = clock()
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=every_s)
            if done:
                return task.result()
            beat(clock() - started)
    finally:
        task.cancel()  # only when the caller was cancelled: otherwise it is done and this does nothing
