"""step_agent_batch: the Dask task that steps one batch of agents for one tick.

It is an ``async def`` so Dask runs it on the worker's event loop, where awaiting the env actor
works. Each agent is rebuilt from its workspace, stepped, and written back; a failing agent is
recorded with its error and the rest of the batch continues. The batch writes its replay and
trace shards under deterministic names, so a retried task overwrites rather than duplicates.
"""

from __future__ import annotations

import asyncio
import time
import traceback
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.agent.registry import resolve_agent
from engine.agent.service_proxy import ServiceProxy
from engine.agent.workspace import AgentWorkspace, workspace_path
from engine.errors import PolisError
from engine.llm.dispatcher import dispatcher_stats
from engine.society.datasets import ACTIONS, LLM_CALLS
from engine.storage.replay import ReplayWriter
from engine.storage.shards import shard_name
from engine.trace import TraceRecorder, write_trace_shard

__all__ = ["BatchJob", "BatchResult", "step_agent_batch"]


@dataclass(frozen=True)
class BatchJob:
    """One batch of one tick."""

    agent_ids: tuple[int, ...]
    step: int  #: 1-based society step being run
    batch: int
    tick: int
    t: datetime  #: simulated time at the end of the step
    proxy: ServiceProxy


@dataclass(frozen=True)
class BatchResult:
    """What the driver needs back (rows themselves stay on disk)."""

    step: int
    batch: int
    agents: int
    statuses: dict[str, int]
    llm_calls: int
    input_tokens: int
    output_tokens: int
    env_calls: int
    duration_s: float
    worker_pid: int
    dispatcher_builds: int


async def _step_one(agent_id: int, job: BatchJob, agents_root: Path, recorder: TraceRecorder) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    started = time.perf_counter()
    row: dict[str, Any] = {"agent_id": agent_id, "step": job.step, "t": job.t, "agent_type": None}
    agent = None
    with recorder.span("agent.step", agent_id=agent_id, step=job.step) as span:
        try:
            ws = workspace_path(agents_root, agent_id)
            cls = resolve_agent(AgentWorkspace(ws).read_json("config.json")["type"])
            row["agent_type"] = cls.__name__
            agent = await cls.from_workspace(ws, job.proxy, trace=recorder)
            outcome = await agent.step(job.tick, job.t)
            await agent.to_workspace()
            row.update(status=outcome.status, tools_called=outcome.tools_called, summary=outcome.summary,
                       turns=outcome.turns, env_calls=outcome.env_calls, error=outcome.error)
        except (PolisError, OSError, ValueError, KeyError, TypeError, AttributeError) as error:
            # Isolate the agent: its row says what went wrong; the batch goes on.
            row.update(status="error", tools_called=[], turns=0, env_calls=0,
                       error=f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=3)}"[:2000])
        span.set(status=row["status"])
    meter = agent.meter if agent is not None else None
    row.update(
        llm_calls=meter.calls if meter else 0,
        llm_failures=meter.failures if meter else 0,
        input_tokens=meter.input_tokens if meter else 0,
        output_tokens=meter.output_tokens if meter else 0,
        llm_latency_ms=meter.latency_ms if meter else 0.0,
        duration_ms=(time.perf_counter() - started) * 1000,
    )
    calls = [{"step": job.step, **r.as_row()} for r in (meter.records if meter else [])]
    return row, calls


async def step_agent_batch(job: BatchJob) -> BatchResult:
    """Step every agent of ``job`` concurrently and write the batch's shards."""
    import os

    started = time.perf_counter()
    run_dir = job.proxy.run_dir
    assert run_dir is not None, "a batch needs a run directory"
    recorder = TraceRecorder()
    results = await asyncio.gather(*(_step_one(a, job, run_dir / "agents", recorder) for a in job.agent_ids))
    rows = [row for row, _ in results]
    calls = [call for _, rows_ in results for call in rows_]
    part = shard_name(job.step, job.batch)
    writer = ReplayWriter(run_dir / "replay")
    writer.write_shard(ACTIONS, part, rows)
    writer.write_shard(LLM_CALLS, part, calls)
    write_trace_shard(run_dir / "trace", part, recorder.drain())
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    return BatchResult(
        step=job.step,
        batch=job.batch,
        agents=len(rows),
        statuses=statuses,
        llm_calls=sum(r["llm_calls"] for r in rows),
        input_tokens=sum(r["input_tokens"] for r in rows),
        output_tokens=sum(r["output_tokens"] for r in rows),
        env_calls=sum(r["env_calls"] for r in rows),
        duration_s=time.perf_counter() - started,
        worker_pid=os.getpid(),
        dispatcher_builds=dispatcher_stats()["builds"],
    )
