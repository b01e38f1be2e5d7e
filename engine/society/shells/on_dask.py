"""The Dask shell: batch jobs as futures on the cluster, the env router in a Dask actor that is replaced when its worker dies.

Dask actors are not resilient: "if the worker dies while holding an actor that actor is lost
forever". The host keeps the actor's future (which keeps the actor alive) but talks to it through
an address-only handle, so a call to a dead actor fails instead of silently reaching the blank actor
Dask would rebuild from the future. :meth:`restart` starts a new actor on a live worker and restores
it from the last committed env snapshot; the society then re-runs the tick.

Batches fan out through :func:`~engine.society.fanout.fan_out` (at most ``limit`` futures in flight, none left
waiting forever); live call counts travel on a Dask topic (:func:`~engine.society.run.live_calls.listening`).

Offloaded work (:meth:`DaskShell.offload`) is a task in a worker thread. Dask cannot stop a running thread: cancelling
the future only marks the task ``cancelled`` in the worker's state (``Worker.state``, the sans-IO ``WorkerState``), so
the work's checkpoint reads that state and stops the work itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any, TypeVar

from distributed import Client, get_worker

from engine.env.actor import EnvRouterActor, EnvRouterConfig
from engine.env.detached import DetachedActor
from engine.env.proxy import EnvRequests, EnvRouterProxy, fail_env_actor
from engine.errors import EnvUnavailableError, WorkCancelledError
from engine.llm.client import LLMClient
from engine.run_progress import Phase, RunPhase
from engine.society.fanout import fan_out, task_slots
from engine.society.run.cluster import driver_host
from engine.society.run.dashboard import ENV_ROUTER, task_key
from engine.society.run.live_calls import LiveCalls, listening
from engine.society.run.preflight import preflight
from engine.society.shells.base import Checkpoint, EnvHost
from engine.storage.run_layout import RunLocation

__all__ = ["DaskEnvHost", "DaskShell"]

J = TypeVar("J")
R = TypeVar("R")


class DaskEnvHost(EnvHost):
    """The env router in a Dask actor on any live worker.

    Args:
        client: an asynchronous distributed Client.
        config, start_t, agent_ids, run_id: as for :class:`~engine.society.shells.base.EnvHost`; the actor's task key
            ends with ``run_id`` (after a generation counter; see :func:`task_key`).
    """

    def __init__(self, client: Client, config: EnvRouterConfig, *, start_t: datetime, agent_ids: list[int], run_id: str) -> None:
        super().__init__(config, start_t=start_t, agent_ids=agent_ids, run_id=run_id)
        self._client = client
        self._future: Any = None
        self._actor: Any = None

    async def _create(self) -> None:
        key = self.key = task_key(ENV_ROUTER, self._run_id, self.generation)
        self._future = self._client.submit(EnvRouterActor, self._config, actor=True, key=key)
        actor = await self._future
        self._actor = DetachedActor(actor._address, actor.key)

    def _handle(self, world_description: str, env_skill_dirs: tuple[tuple[str, str], ...]) -> EnvRequests:
        return EnvRouterProxy(address=self._actor.address, key=self._actor.key, world_description=world_description,
                              env_skill_dirs=env_skill_dirs)

    @property
    def lost(self) -> bool:
        """True once the scheduler has lost the actor (its worker died)."""
        return self._future is not None and self._future.status != "finished"

    async def _call(self, method: str, *args: Any) -> Any:
        if self.lost:
            raise EnvUnavailableError(f"env actor generation {self.generation} was lost with its worker")
        return await getattr(self._actor, method)(*args)

    async def watch(self) -> None:
        """When the actor's worker dies (mid-tick), fail the env requests waiting on it at once, so the
        batches abort in milliseconds instead of retrying connections until their timeout."""
        while not self.lost:
            await asyncio.sleep(0.2)
        await self._client.run(fail_env_actor, self.key, "its worker died", on_error="ignore")

    async def where(self) -> dict[str, Any]:
        """The worker address and process id hosting the actor."""
        return await self._call("where")

    def scratch(self, run_dir: RunLocation, name: str) -> DaskEnvHost:
        config, run_id = self._relocated(run_dir, name)
        return DaskEnvHost(self._client, config, start_t=self._start_t, agent_ids=self._agent_ids, run_id=run_id)

    async def release(self) -> None:
        if self._future is not None:
            self._future.release()
            self._future = None


class DaskShell:
    """Runs batch jobs as futures on ``client``'s cluster and the env router in a Dask actor (a
    :class:`~engine.society.shells.base.Shell`).

    Args:
        client: an asynchronous distributed Client.
    """

    def __init__(self, client: Client) -> None:
        self.client = client

    async def slots(self, limit: int | None = None) -> int:
        return await task_slots(self.client, limit)

    def env_host(self, config: EnvRouterConfig, *, start_t: datetime, agent_ids: list[int], run_id: str) -> DaskEnvHost:
        return DaskEnvHost(self.client, config, start_t=start_t, agent_ids=agent_ids, run_id=run_id)

    async def fan_out(self, run: Callable[[J], Awaitable[R]], jobs: Sequence[J], key: Callable[[J], str], *,
                      limit: int | None, on_result: Callable[[R], None], env: EnvHost | None = None) -> list[R]:
        def submit(job: J) -> Any:
            return self.client.submit(run, job, key=key(job), pure=False)

        def lost() -> EnvUnavailableError | None:
            return EnvUnavailableError("the env actor was lost meanwhile") if env is not None and env.lost else None

        watcher = asyncio.create_task(env.watch()) if env is not None else None
        try:
            return await fan_out(self.client, jobs, submit, limit=limit, on_result=on_result, stop=lost)
        finally:
            if watcher is not None:
                watcher.cancel()

    async def offload(self, work: Callable[[Checkpoint], R], *, key: str) -> R:
        future = self.client.submit(_offloaded, work, key, key=key, pure=False)
        try:
            return await future
        except asyncio.CancelledError:
            # A running task goes on until its next checkpoint, which sees it cancelled; a waiting one never starts.
            await self.client.cancel(future)
            raise

    def driver_host(self) -> str:
        return driver_host(self.client)

    async def preflight(self, run_dir: RunLocation, llm_clients: Mapping[str, LLMClient], on_phase: Callable[[Phase], None]) -> None:
        on_phase(Phase(RunPhase.CHECKING_WORKERS))
        await preflight(self.client, run_dir, llm_clients)

    @asynccontextmanager
    async def listening(self, run: str, live: LiveCalls, on_heard: Callable[[], None]) -> AsyncIterator[LiveCalls]:
        async with listening(self.client, run, live, on_heard) as heard:
            yield heard


#: States of a task the worker no longer wants the result of.
_UNWANTED = frozenset({"cancelled", "released", "forgotten"})


def _offloaded(work: Callable[[Checkpoint], R], key: str) -> R:
    """``work`` in a worker thread, its checkpoint raising once the task ``key`` is cancelled (see the module)."""
    state = get_worker().state

    def checkpoint() -> None:
        task = state.tasks.get(key)
        if task is None or task.state in _UNWANTED:
            raise WorkCancelledError(f"{key}: the run no longer wants this work (cancelled)")

    return work(checkpoint)
