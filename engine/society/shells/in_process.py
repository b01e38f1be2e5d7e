"""The in-process shell: a run's batch jobs as asyncio tasks and its env router as an object, in this process.

It carries out the same commands as the Dask shell, on the same run directory layout, so a run made here
resumes on a cluster and the other way round. What it leaves out is what only a cluster has: worker
processes to lose, a scheduler to ask, a dashboard. Use it for unit-speed tests and small notebook runs
(:func:`polis.Session` with ``cluster="in-process"``); the crash and worker-loss tests stay on a real cluster.

The router is an :class:`~engine.env.actor.EnvRouterActor` object whose control methods are awaited
directly; agents reach it through an :class:`~engine.env.proxy.InProcessEnvProxy`, which groups their
requests into ``ask_many`` calls as the Dask proxy does. :meth:`InProcessEnvHost.lose` drops it as a dead
worker would (for tests of recovery without a cluster).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, TypeVar

from engine.env.actor import EnvRouterActor, EnvRouterConfig
from engine.env.proxy import EnvRequests, InProcessEnvProxy
from engine.errors import EnvUnavailableError, WorkCancelledError
from engine.llm.client import LLMClient
from engine.run_progress import Phase
from engine.society.run.dashboard import ENV_ROUTER, task_key
from engine.society.run.live_calls import LiveCalls, listening_here
from engine.society.shells.base import Checkpoint, EnvHost
from engine.storage.run_layout import RunLocation

__all__ = ["DEFAULT_SLOTS", "InProcessEnvHost", "InProcessShell"]

J = TypeVar("J")
R = TypeVar("R")

#: batch jobs in flight at once by default: agents await the LLM, so a few batches keep one event loop busy
DEFAULT_SLOTS = 4


class InProcessEnvHost(EnvHost):
    """The env router as an object in this process (see the module)."""

    def __init__(self, config: EnvRouterConfig, *, start_t: datetime, agent_ids: list[int], run_id: str) -> None:
        super().__init__(config, start_t=start_t, agent_ids=agent_ids, run_id=run_id)
        self._actor: EnvRouterActor | None = None
        self._proxy: InProcessEnvProxy | None = None
        self._lost: asyncio.Event | None = None
        self.calls: list[str] = []  #: every control call, in order (round trips, as a Dask actor would count them)

    async def _create(self) -> None:
        self.key = task_key(ENV_ROUTER, self._run_id, self.generation)
        self._actor = EnvRouterActor(self._config)
        self._lost = asyncio.Event()

    def _handle(self, world_description: str, env_skill_dirs: tuple[tuple[str, str], ...]) -> EnvRequests:
        assert self._actor is not None
        self._proxy = InProcessEnvProxy(self._actor.ask_many, serve_direct=self._actor.serve_direct, world_description=world_description, env_skill_dirs=env_skill_dirs)
        return self._proxy

    @property
    def lost(self) -> bool:
        return self._lost is not None and self._lost.is_set()

    async def _call(self, method: str, *args: Any) -> Any:
        if self._actor is None or self.lost:
            raise EnvUnavailableError(f"env router generation {self.generation} was lost")
        self.calls.append(method)
        return await getattr(self._actor, method)(*args)

    def lose(self, reason: str = "lost") -> None:
        """Drop the router as a dead worker would: waiting and later requests and calls fail with EnvUnavailableError."""
        if self._lost is not None:
            self._lost.set()
        if self._proxy is not None:
            self._proxy.close(reason)

    async def watch(self) -> None:
        assert self._lost is not None, "the env router has not started"
        await self._lost.wait()

    async def where(self) -> dict[str, Any]:
        """This process: the router has no worker address."""
        import os

        return {"address": None, "pid": os.getpid()}

    def scratch(self, run_dir: RunLocation, name: str) -> InProcessEnvHost:
        config, run_id = self._relocated(run_dir, name)
        return InProcessEnvHost(config, start_t=self._start_t, agent_ids=self._agent_ids, run_id=run_id)

    async def release(self) -> None:
        if self._proxy is not None:
            self._proxy.close("released")
        actor, self._actor = self._actor, None
        if actor is not None:
            await actor.close()


class InProcessShell:
    """Runs batch jobs as tasks on this event loop and the env router as an object here (a
    :class:`~engine.society.shells.base.Shell`; see the module).

    Args:
        slots: batch jobs in flight at once (a spec's ``max_workers`` lowers it).
    """

    #: no Dask client: no dashboard, no workers
    client = None

    def __init__(self, slots: int = DEFAULT_SLOTS) -> None:
        if slots < 1:
            raise ValueError(f"slots must be at least 1, not {slots}")
        self._slots = slots

    async def slots(self, limit: int | None = None) -> int:
        return max(1, self._slots if limit is None else min(self._slots, limit))

    def env_host(self, config: EnvRouterConfig, *, start_t: datetime, agent_ids: list[int], run_id: str) -> InProcessEnvHost:
        return InProcessEnvHost(config, start_t=start_t, agent_ids=agent_ids, run_id=run_id)

    async def fan_out(self, run: Callable[[J], Awaitable[R]], jobs: Sequence[J], key: Callable[[J], str], *,
                      limit: int | None, on_result: Callable[[R], None], env: EnvHost | None = None) -> list[R]:
        pending = list(jobs)
        results: list[R] = []
        failure: BaseException | None = None

        async def worker() -> None:
            nonlocal failure
            while pending and failure is None:
                job = pending.pop(0)
                try:
                    result = await run(job)
                except Exception as error:  # noqa: BLE001 - raised once the jobs running are done, as on Dask
                    failure = failure or error
                    return
                results.append(result)
                on_result(result)
                if env is not None and env.lost:
                    failure = failure or EnvUnavailableError("the env router was lost meanwhile")

        workers = [asyncio.ensure_future(worker()) for _ in range(min(await self.slots(limit), len(pending)))]
        try:
            await asyncio.gather(*workers)
        except asyncio.CancelledError:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            raise
        if failure is not None:
            raise failure
        return results

    async def offload(self, work: Callable[[Checkpoint], R], *, key: str) -> R:
        """``work`` on a thread of the default executor; a cancelled caller waits for it to stop at its next checkpoint
        (a thread cannot be stopped from outside), so none goes on working for a run that is over."""
        stop = threading.Event()

        def checkpoint() -> None:
            if stop.is_set():
                raise WorkCancelledError(f"{key}: the run no longer wants this work (cancelled)")

        running = asyncio.ensure_future(asyncio.to_thread(work, checkpoint))
        try:
            return await asyncio.shield(running)
        except asyncio.CancelledError:
            stop.set()
            await asyncio.wait([running])
            if not running.cancelled():
                running.exception()  # retrieved: the WorkCancelledError it ended with is expected, not to be logged
            raise

    def driver_host(self) -> str:
        return "127.0.0.1"

    async def preflight(self, run_dir: RunLocation, llm_clients: Mapping[str, LLMClient], on_phase: Callable[[Phase], None]) -> None:
        """Nothing to check (no phase to report): the batches run in this process, which wrote ``run_dir`` and holds the LLM clients."""

    @asynccontextmanager
    async def listening(self, run: str, live: LiveCalls, on_heard: Callable[[], None]) -> AsyncIterator[LiveCalls]:
        with listening_here(run, live, on_heard) as heard:
            yield heard
