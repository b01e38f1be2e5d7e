"""Shell: where a run's batches and its env router live. The society's policy does not know which.

:class:`~engine.society.shells.on_dask.DaskShell` runs batch jobs as futures on a Dask cluster and the router
in a Dask actor; :class:`~engine.society.shells.in_process.InProcessShell` runs both in this process on the
event loop (``asyncio``), for unit tests and small notebook runs. Both carry out the same
:class:`~engine.society.tick_core.TickCore` commands, against the same run directory layout.

:class:`EnvHost` is the env router's host: the typed control of :mod:`engine.env.control` (two round trips
per transaction), its start from a committed snapshot, and its replacement after a loss.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np

from engine.env.actor import EnvRouterConfig, template_cache_dir
from engine.env.control import BeginTick, EndConsult, EndTick, TickEnd
from engine.env.module_datasets import module_datasets
from engine.env.registry import resolve_env_module
from engine.llm.budget import Allowance
from engine.run_progress import Phase
from engine.storage.catalog import DatasetSchema
from engine.storage.run_layout import RunLayout, RunLocation, is_url

if TYPE_CHECKING:
    from engine.env.proxy import EnvRequests
    from engine.llm.client import LLMClient
    from engine.society.run.live_calls import LiveCalls

__all__ = ["Checkpoint", "EnvHost", "Shell"]

J = TypeVar("J")
R = TypeVar("R")

#: What offloaded work calls between its steps: it returns, or raises
#: :class:`~engine.errors.WorkCancelledError` once the run no longer wants the work (see :meth:`Shell.offload`).
Checkpoint = Callable[[], None]


class EnvHost:
    """The env router of one run, wherever it lives; subclasses say where (:meth:`_create`, :meth:`_call`).

    Args:
        config: how to build the router.
        start_t: the run's start time (modules initialise with it before a snapshot is restored).
        agent_ids: every agent of the run.
        run_id: names the host's actor (see :func:`~engine.society.run.dashboard.task_key`).
    """

    def __init__(self, config: EnvRouterConfig, *, start_t: datetime, agent_ids: list[int], run_id: str) -> None:
        self._config = config
        self._start_t = start_t
        self._agent_ids = agent_ids
        self._run_id = run_id
        self.generation = 0
        self.key = ""  #: the current actor's name
        self.proxy: EnvRequests | None = None
        self.info: dict[str, Any] = {}

    async def start(self, snapshot: str | None, allowance: Allowance | None = None) -> EnvRequests:
        """Create the router and restore snapshot ``snapshot``; returns the agents' handle on it.

        ``allowance`` is what the router's own LLM calls during init may spend (None: unlimited).
        """
        self.generation += 1
        await self._create()
        ids = np.asarray(self._agent_ids, dtype=np.int64)  # one buffer to carry, not a list of ints (EnvRouterActor.init)
        self.info = await self._call("init", self._start_t, ids, snapshot, allowance)
        self.proxy = self._handle(self.info["world_description"], tuple(tuple(pair) for pair in self.info["env_skill_dirs"]))
        return self.proxy

    async def _create(self) -> None:
        """Start a new router (generation :attr:`generation`)."""
        raise NotImplementedError

    def _handle(self, world_description: str, env_skill_dirs: tuple[tuple[str, str], ...]) -> EnvRequests:
        """The agents' handle on the router :meth:`_create` started."""
        raise NotImplementedError

    async def _call(self, method: str, *args: Any) -> Any:
        """Call one control method of the router.

        Raises:
            EnvUnavailableError: the router was lost.
        """
        raise NotImplementedError

    @property
    def lost(self) -> bool:
        """True once the router was lost (its worker died)."""
        return False

    async def watch(self) -> None:
        """Fail the requests waiting on the router at once when it is lost (returns only then)."""
        raise NotImplementedError

    async def release(self) -> None:
        """Let the router go (a released router serves no more requests; one in this process is closed)."""
        raise NotImplementedError

    def _relocated(self, run_dir: RunLocation, name: str) -> tuple[EnvRouterConfig, str]:
        """The config and run id of another host of this env working in ``run_dir`` (see :meth:`scratch`)."""
        cache = template_cache_dir(self._config)
        run = self._config.run_dir
        if (cache is not None and run is not None and not is_url(run) and not is_url(run_dir)
                and cache.resolve().is_relative_to(Path(run).resolve())):
            cache = RunLayout(Path(run_dir)).codegen_cache
        return replace(self._config, run_dir=run_dir, template_cache_dir=cache), f"{self._run_id}-{name}"

    def scratch(self, run_dir: RunLocation, name: str) -> EnvHost:
        """Another host of the same env working in ``run_dir`` (a scratch copy of the run's; named ``name``): the
        template cache the run keeps in its own ``env/`` is read from the copy too."""
        raise NotImplementedError

    @property
    def live_proxy(self) -> EnvRequests:
        """The current router's handle (there is one from :meth:`start` on)."""
        assert self.proxy is not None, "the env router has not started"
        return self.proxy

    def replay_datasets(self) -> list[DatasetSchema]:
        """The replay datasets the env modules write, as the router writes them (``run`` first)."""
        return module_datasets(resolve_env_module(type_name) for type_name, _ in self._config.modules)

    async def begin_tick(self, begin: BeginTick) -> None:
        """Begin a transaction (:meth:`~engine.env.actor.EnvRouterActor.begin_tick`); an idle begin costs no round trip."""
        if not begin.idle:
            await self._call("begin_tick", begin)

    async def end_tick(self, end: EndTick) -> TickEnd:
        """End a tick: its call records and refusals, and the env step's (:meth:`~engine.env.actor.EnvRouterActor.end_tick`)."""
        return await self._call("end_tick", end)

    async def end_consult(self, end: EndConsult) -> TickEnd:
        """End an ask or intervene (:meth:`~engine.env.actor.EnvRouterActor.end_consult`)."""
        return await self._call("end_consult", end)

    async def usage(self) -> dict[str, Any]:
        """The router's usage and the requests served (:meth:`~engine.env.actor.EnvRouterActor.usage`)."""
        return await self._call("usage")

    async def restart(self, snapshot: str | None) -> EnvRequests:
        """Drop the lost router and start a new one from ``snapshot``."""
        await self.release()
        return await self.start(snapshot)


class Shell(Protocol):
    """Where a run's batch jobs and env router run (:class:`~engine.society.shells.on_dask.DaskShell`,
    :class:`~engine.society.shells.in_process.InProcessShell`)."""

    async def slots(self, limit: int | None = None) -> int:
        """How many batch jobs run at once now, at most ``limit`` (at least 1)."""
        ...

    def env_host(self, config: EnvRouterConfig, *, start_t: datetime, agent_ids: list[int], run_id: str) -> EnvHost:
        """A host for the run's env router (started by :meth:`EnvHost.start`)."""
        ...

    async def fan_out(self, run: Callable[[J], Awaitable[R]], jobs: Sequence[J], key: Callable[[J], str], *,
                      limit: int | None, on_result: Callable[[R], None], env: EnvHost | None = None) -> list[R]:
        """Run ``run(job)`` for every job, at most ``limit`` at once; returns the results in completion order.

        ``key`` names each job's task; ``on_result`` is called as each result arrives. On a failure no new job
        starts, the jobs running end, then the first error is raised. With ``env``, its loss ends the fan-out
        with :class:`~engine.errors.EnvUnavailableError`.
        """
        ...

    async def offload(self, work: Callable[[Checkpoint], R], *, key: str) -> R:
        """Run the blocking ``work(checkpoint)`` away from this event loop and this process's threads where it can:
        as a task on a worker (Dask, named ``key``), or on a thread of its own (in-process). A run's heavy start-up
        (its network) goes there, so that it holds no thread of a service and a cancelled run stops it.

        When the caller is cancelled, ``work``'s next ``checkpoint()`` raises
        :class:`~engine.errors.WorkCancelledError`, so ``work`` calls it between steps of bounded length. ``work``
        must pickle (a module-level function, or a ``functools.partial`` of one).
        """
        ...

    def driver_host(self) -> str:
        """The address the batches reach this process by (where local model servers listen)."""
        ...

    async def preflight(self, run_dir: RunLocation, llm_clients: Mapping[str, LLMClient], on_phase: Callable[[Phase], None]) -> None:
        """Check, before tick 0, that the batches' processes can do their part (see :func:`~engine.society.run.preflight.preflight`),
        reporting :attr:`~engine.run_progress.RunPhase.CHECKING_WORKERS` to ``on_phase`` if there are workers to check.

        Raises:
            PreflightError: one cannot.
        """
        ...

    def listening(self, run: str, live: LiveCalls, on_heard: Callable[[], None]) -> AbstractAsyncContextManager[LiveCalls]:
        """Fold run ``run``'s live call counts into ``live`` while the block runs (:mod:`engine.society.run.live_calls`)."""
        ...
