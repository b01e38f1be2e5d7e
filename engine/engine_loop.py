"""The engine's own event loop, on a thread of its own, so that runs never hold up their caller's loop.

Two callers use it. A :class:`polis.Session` drives its runs on one, so a blocking ``polis.run`` works the
same in a script and in a Jupyter cell (whose kernel's loop already runs on the main thread).

The service has two event loops. uvicorn's answers requests; this one holds the shared Dask client
and everything the Submitter starts: every run's driver (the society loop, its preflight, the
registry writes of its progress). A run's synchronous stretches (building a society, fsyncing a
commit) then cost an HTTP request at most a GIL switch interval, not the stretch itself: with both
on one loop, `benchmarks/api_load.py` measured polls p99 of 163-172 ms under 50 submissions, against
the goal of 100 ms.

Routes reach the Submitter only through :meth:`EngineLoop.call`; the registry and the event hub are
thread-safe, so reads and event streams stay on the HTTP loop.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

__all__ = ["EngineLoop"]

T = TypeVar("T")

_STOP_TIMEOUT_S = 60.0


class EngineLoop:
    """An asyncio event loop running on a daemon thread until :meth:`stop`.

    Args:
        name: the thread's name (it shows in stack dumps and profilers).
    """

    def __init__(self, name: str = "polis-engine") -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the engine loop and wait for its result from the calling loop.

        Raises:
            Whatever the coroutine raises. Cancelling the caller cancels the coroutine.
        """
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._loop))

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule a coroutine on the engine loop from any thread (none of its own running); its future."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def call(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call a plain function on the engine loop (e.g. a Submitter method that creates tasks there).

        Raises:
            Whatever ``fn`` raises.
        """

        async def here() -> T:
            return fn(*args, **kwargs)

        return await self.run(here())

    def stop(self) -> None:
        """Stop the loop once what it runs now has yielded, and close it. Idempotent.

        As ``asyncio.run`` ends, the loop's asynchronous generators are closed first: what they hold
        (the LLM transport's keep-alive pool of this loop, for one) is released on the loop it belongs to.
        """
        if self._loop.is_closed():
            return
        if self._thread.is_alive():
            with contextlib.suppress(Exception):  # a generator that fails to close is the owner's to report; stopping goes on
                asyncio.run_coroutine_threadsafe(self._loop.shutdown_asyncgens(), self._loop).result(timeout=_STOP_TIMEOUT_S)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=_STOP_TIMEOUT_S)
        if not self._thread.is_alive():
            self._loop.close()
