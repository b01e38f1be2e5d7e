"""run_experiment: one spec, end to end, on a Dask client (used by the CLI and the service)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distributed import Client

from engine.agent.registry import resolve_agent
from engine.agent.service_proxy import ServiceProxy
from engine.env.actor import EnvRouterActor, EnvRouterConfig
from engine.env.proxy import EnvRouterProxy
from engine.env.registry import resolve_env_module
from engine.errors import UnsupportedStepError
from engine.llm.client import LLMClient
from engine.society.batch import BatchResult
from engine.society.datasets import ACTIONS, LLM_CALLS
from engine.society.society import AgentSociety
from engine.society.status import write_society
from engine.spec import ExperimentSpec, RunStep
from engine.storage.catalog import Catalog
from engine.storage.replay import ReplayWriter
from engine.storage.shards import shard_name

__all__ = ["RunProgress", "RunSummary", "run_experiment"]


@dataclass(frozen=True)
class RunProgress:
    status: str  #: starting | running | completed | failed | cancelled
    ticks_done: int
    ticks_total: int
    agent_steps_done: int
    agent_steps_total: int
    error: str | None = None


@dataclass(frozen=True)
class RunSummary:
    status: str
    run_dir: Path
    ticks_done: int
    agent_steps: int
    llm_calls: int
    input_tokens: int
    output_tokens: int
    duration_s: float
    error: str | None
    statuses: dict[str, int] | None = None
    tick_seconds: tuple[float, ...] = ()
    env: dict[str, Any] | None = None


def _check_supported(spec: ExperimentSpec) -> None:
    for i, step in enumerate(spec.steps):
        if not isinstance(step, RunStep):
            raise UnsupportedStepError(
                f"steps.{i}: step type {step.type!r} is not executable in this build yet (only 'run'); "
                "remove it or run the spec's 'run' steps alone"
            )


def _clients(spec: ExperimentSpec) -> dict[str, LLMClient]:
    clients = {"default": LLMClient(role="default", seed=spec.seed, **spec.llm.default.model_dump())}
    coder = spec.llm.coder or spec.llm.default
    clients["coder"] = LLMClient(role="coder", seed=spec.seed, **coder.model_dump())
    return clients


def _register_datasets(run_dir: Path, spec: ExperimentSpec) -> None:
    catalog = Catalog(run_dir / "replay")
    for schema in (ACTIONS, LLM_CALLS):
        catalog.register(schema)
    for module in spec.environment.modules:
        for schema in resolve_env_module(module.type).replay_datasets():
            catalog.register(schema)


async def run_experiment(
    spec: ExperimentSpec,
    run_dir: Path,
    client: Client,
    *,
    on_progress: Callable[[RunProgress], None] | None = None,
) -> RunSummary:
    """Run every step of ``spec`` into ``run_dir``; failures come back as status ``failed``.

    Raises:
        asyncio.CancelledError: the run was cancelled (status ``cancelled`` is written first).
    """
    started = time.perf_counter()
    run_dir = Path(run_dir)
    agents = spec.all_agents()
    ticks_total = spec.total_ticks()
    steps_total = ticks_total * len(agents)
    progress = {"ticks": 0, "agent_steps": 0}

    def report(status: str, error: str | None = None) -> None:
        if on_progress is not None:
            on_progress(RunProgress(status, progress["ticks"], ticks_total, progress["agent_steps"], steps_total, error))

    def on_batch(result: BatchResult) -> None:
        progress["agent_steps"] += result.agents
        report("running")

    report("starting")
    society: AgentSociety | None = None
    actor_future = None
    env_usage: dict[str, Any] | None = None
    try:
        _check_supported(spec)
        for agent in agents:
            resolve_agent(agent.type)
        run_dir.mkdir(parents=True, exist_ok=True)
        clients = _clients(spec)
        write_society(run_dir, {
            "name": spec.name, "spec_hash": spec.spec_hash(), "spec": spec.model_dump(mode="json"),
            "env_modules": [m.model_dump(mode="json") for m in spec.environment.modules],
            "llm": {role: c.model_dump(mode="json") for role, c in clients.items()},
        })
        _register_datasets(run_dir, spec)
        config = EnvRouterConfig(
            modules=tuple((m.type, dict(m.kwargs)) for m in spec.environment.modules),
            router=spec.environment.router,
            max_steps=spec.environment.max_router_steps,
            coder=clients["coder"],
            run_dir=run_dir,
        )
        actor_future = client.submit(EnvRouterActor, config, actor=True, key=f"env-router-{uuid.uuid4().hex[:8]}")
        actor = await actor_future
        info = await actor.init(spec.start_time, [a.id for a in agents])
        proxy = ServiceProxy(
            env=EnvRouterProxy(address=actor._address, key=actor.key, world_description=info["world_description"],
                               env_skill_dirs=tuple(info["env_skill_dirs"])),
            llm=clients,
            run_dir=run_dir,
            run_id=f"{spec.name}-{uuid.uuid4().hex[:6]}",
        )
        society = AgentSociety(
            [a.model_dump() for a in agents], env=actor, service_proxy=proxy, start_t=spec.start_time,
            run_dir=run_dir, client=client, batch_size=spec.batch_size, max_workers=spec.max_workers, on_batch=on_batch,
        )
        await society.init()
        for index, step in enumerate(spec.steps):
            assert isinstance(step, RunStep)
            for _ in range(step.num_steps):
                await society.step(step.tick)
                ReplayWriter(run_dir / "replay").write_shard(
                    LLM_CALLS, shard_name(society.step_count, "router"),
                    [{"step": society.step_count, **r} for r in await actor.drain_llm_records()],
                )
                progress["ticks"] = society.step_count
                report("running")
            society.mark_step_completed(index)
        env_usage = await actor.usage()
        society.set_status("completed")
        status, error = "completed", None
    except asyncio.CancelledError:
        if society is not None:
            society.set_status("cancelled")
        report("cancelled")
        raise
    except Exception as caught:  # noqa: BLE001 - workers re-raise any type (ImportError, KilledWorker, ...); record it
        status, error = "failed", f"{type(caught).__name__}: {caught}"
        if society is not None:
            society.set_status("failed", error)
    finally:
        if actor_future is not None:
            actor_future.release()
    report(status, error)
    totals = society.totals if society is not None else None
    return RunSummary(
        status=status,
        run_dir=run_dir,
        ticks_done=progress["ticks"],
        agent_steps=progress["agent_steps"],
        llm_calls=(totals.llm_calls if totals else 0) + (env_usage or {}).get("calls", 0),
        input_tokens=(totals.input_tokens if totals else 0) + (env_usage or {}).get("input_tokens", 0),
        output_tokens=(totals.output_tokens if totals else 0) + (env_usage or {}).get("output_tokens", 0),
        duration_s=time.perf_counter() - started,
        error=error,
        statuses=dict(totals.statuses) if totals else None,
        tick_seconds=tuple(totals.tick_seconds) if totals else (),
        env=env_usage,
    )
