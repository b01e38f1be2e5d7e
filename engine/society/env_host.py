"""EnvHost: owns a run's env router actor, and replaces it when the worker holding it dies.

Dask actors are not resilient: "if the worker dies while holding an actor that actor is lost
forever". The host keeps the actor's future (which keeps the actor alive) but talks to it through
an address-only handle, so a call to a dead actor fails instead of silently reaching the blank actor
Dask would rebuild from the future. :meth:`restart` starts a new actor on a live worker and restores
it from the last committed env snapshot; the society then re-runs the tick.

The society controls the actor through the typed calls of :mod:`engine.env.control` (:meth:`EnvHost.begin_tick`,
:meth:`EnvHost.end_tick`, :meth:`EnvHost.end_consult`): two round trips per transaction.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from distributed import Client

from engine.env.actor import EnvRouterActor, EnvRouterConfig, template_cache_dir
from engine.env.control import BeginTick, EndConsult, EndTick, TickEnd
from engine.env.detached import DetachedActor
from engine.env.module_datasets import module_datasets
from engine.env.proxy import EnvRouterProxy, fail_env_actor
from engine.env.registry import resolve_env_module
from engine.errors import EnvUnavailableError
from engine.llm.budget import Allowance
from engine.society.run.dashboard import ENV_ROUTER, task_key
from engine.storage.catalog import DatasetSchema
from engine.storage.run_layout import RunLayout, is_url

__all__ = ["EnvHost"]


class EnvHost:
    """The env actor of one run.

    Args:
        client: an asynchronous distributed Client.
        config: how to build the router.
        start_t: the run's start time (modules initialise with it before a snapshot is restored).
        agent_ids: every agent of the run.
        run_id: ends the actor's task key (after a generation counter; see :func:`task_key`).
    """

    def __init__(self, client: Client, config: EnvRouterConfig, *, start_t: datetime, agent_ids: list[int], run_id: str) -> None:
        self._client = client
        self._config = config
        self._start_t = start_t
        self._agent_ids = agent_ids
        self._run_id = run_id
        self._future: Any = None
        self._handle: Any = None
        self.generation = 0
        self.key = ""  #: the current actor's task key
        self.proxy: EnvRouterProxy | None = None
        self.info: dict[str, Any] = {}

    async def start(self, snapshot: str | None, allowance: Allowance | None = None) -> EnvRouterProxy:
        """Create the actor (on any live worker) and restore snapshot ``snapshot``; returns the agents' proxy.

        ``allowance`` is what the actor's own LLM calls during init may spend (None: unlimited).
        """
        self.generation += 1
        key = self.key = task_key(ENV_ROUTER, self._run_id, self.generation)
        self._future = self._client.submit(EnvRouterActor, self._config, actor=True, key=key)
        actor = await self._future
        self._handle = DetachedActor(actor._address, actor.key)
        self.info = await self._call("init", self._start_t, self._agent_ids, snapshot, allowance)
        self.proxy = EnvRouterProxy(
            address=actor._address, key=actor.key, world_description=self.info["world_description"],
            env_skill_dirs=tuple(tuple(pair) for pair in self.info["env_skill_dirs"]),
        )
        return self.proxy

    @property
    def live_proxy(self) -> EnvRouterProxy:
        """The current actor's proxy (there is one from :meth:`start` on)."""
        assert self.proxy is not None, "the env actor has not started"
        return self.proxy

    def replay_datasets(self) -> list[DatasetSchema]:
        """The replay datasets the env modules write, as the actor writes them (``run`` first)."""
        return module_datasets(resolve_env_module(type_name) for type_name, _ in self._config.modules)

    @property
    def lost(self) -> bool:
        """True once the scheduler has lost the actor (its worker died)."""
        return self._future is not None and self._future.status != "finished"

    async def _call(self, method: str, *args: Any) -> Any:
        """Call an actor method.

        Raises:
            EnvUnavailableError: the actor's worker cannot be reached.
        """
        if self.lost:
            raise EnvUnavailableError(f"env actor generation {self.generation} was lost with its worker")
        return await getattr(self._handle, method)(*args)

    async def watch(self) -> None:
        """When the actor's worker dies (mid-tick), fail the env requests waiting on it at once, so the
        batches abort in milliseconds instead of retrying connections until their timeout."""
        while not self.lost:
            await asyncio.sleep(0.2)
        await self._client.run(fail_env_actor, self.key, "its worker died", on_error="ignore")

    async def begin_tick(self, begin: BeginTick) -> None:
        """Begin a transaction on the actor (:meth:`EnvRouterActor.begin_tick`); an idle begin costs no round trip."""
        if not begin.idle:
            await self._call("begin_tick", begin)

    async def end_tick(self, end: EndTick) -> TickEnd:
        """End a tick on the actor: its call records and refusals, and the env step's (:meth:`EnvRouterActor.end_tick`)."""
        return await self._call("end_tick", end)

    async def end_consult(self, end: EndConsult) -> TickEnd:
        """End an ask or intervene on the actor (:meth:`EnvRouterActor.end_consult`)."""
        return await self._call("end_consult", end)

    async def usage(self) -> dict[str, Any]:
        """The router's usage and the requests served (:meth:`EnvRouterActor.usage`)."""
        return await self._call("usage")

    async def where(self) -> dict[str, Any]:
        return await self._call("where")

    async def restart(self, snapshot: str | None) -> EnvRouterProxy:
        """Drop the lost actor and start a new one from ``snapshot``."""
        self.release()
        return await self.start(snapshot)

    def scratch(self, run_dir: Path | str, name: str) -> EnvHost:
        """Another host of the same env working in ``run_dir`` (a scratch copy of the run's; key suffix
        ``name``): the template cache the run keeps in its own ``env/`` is read from the copy too."""
        cache = template_cache_dir(self._config)
        run = self._config.run_dir
        if (cache is not None and run is not None and not is_url(run) and not is_url(run_dir)
                and cache.resolve().is_relative_to(Path(run).resolve())):
            cache = RunLayout(Path(run_dir)).codegen_cache
        config = replace(self._config, run_dir=run_dir, template_cache_dir=cache)
        return EnvHost(self._client, config, start_t=self._start_t, agent_ids=self._agent_ids, run_id=f"{self._run_id}-{name}")

    def release(self) -> None:
        if self._future is not None:
            self._future.release()
            self._future = None
