"""One agent-step of a packed run, and the pack its batch writes (see :mod:`engine.society.workspaces.manifest`).

The agent is loaded into memory from the pack the last commit lists for it, stepped, and kept in
memory; at the end the batch writes one pack with every one of its agents: the stepped ones as they
are now, the others (failed, or stopped by the budget) as they were. So a step is undone by not
packing it, and the batch is all or nothing: a retried batch (its worker died) steps its agents
again from the committed state. The env updates a lost attempt queued are dropped first: the batch
leaves a marker beside its pack when it starts, so a second start knows it is a retry.
"""

from __future__ import annotations

import time
import traceback
from typing import Any

from engine.agent.base import AgentBase
from engine.agent.memory.snapshot import episodes_offset
from engine.agent.packed import PackedWorkspaces
from engine.agent.registry import resolve_agent
from engine.agent.service_proxy import ServiceProxy
from engine.agent.workspace_in_memory import MemoryWorkspace
from engine.errors import BudgetExhaustedError, EnvUnavailableError, PolisError, RunError, StaleRunError
from engine.failpoints import failpoint
from engine.llm.budget import BudgetGate
from engine.llm.meter import serving_agent
from engine.society.transcripts import TEXT_KEYS, call_rows
from engine.society.workspaces.common import ISOLATED, BatchJob, memory_row, usage_columns
from engine.society.workspaces.manifest import pack_key, started_key
from engine.storage.packs import PackWriter
from engine.trace import TraceRecorder

__all__ = ["begin_packed_batch", "step_packed_agent", "write_batch_pack"]


def _pack_name(job: BatchJob) -> str:
    return pack_key(job.txn, job.batch, job.attempt[:12] or "run")


async def begin_packed_batch(job: BatchJob, packed: PackedWorkspaces) -> bool:
    """Mark the batch started; on a second start drop what the lost attempt queued in the env. True: a retry."""
    if packed.store.set_if_absent(started_key(_pack_name(job)), b""):
        return False
    for agent_id in job.agent_ids:
        await job.proxy.env.discard_pending(agent_id)
    return True


async def step_packed_agent(agent_id: int, job: BatchJob, proxy: ServiceProxy, packed: PackedWorkspaces,
                            recorder: TraceRecorder, gate: BudgetGate | None) -> dict[str, Any] | None:
    """Step one agent in memory; returns ``{"row", "calls", "memory", "workspace"}`` (None: the budget stopped it).

    ``workspace`` is what to pack: None when the step failed (the agent is packed as it was)."""
    assert job.packs is not None
    started = time.perf_counter()
    serving_agent.set(agent_id)
    row: dict[str, Any] = {"run": job.proxy.run_id, "agent_id": agent_id, "step": job.step, "t": job.t, "agent_type": None,
                           "tier": "llm"}
    agent: AgentBase | None = None
    ws: MemoryWorkspace | None = None
    episodes_from: int | None = None
    with recorder.span("agent.step", agent_id=agent_id, step=job.step) as span:
        try:
            ws = packed.load(agent_id, job.packs[agent_id])
            cls = resolve_agent(ws.read_json("config.json")["type"])
            row["agent_type"] = cls.__name__
            agent = await cls.from_workspace(ws, proxy, budget=gate)
            episodes_from = episodes_offset(ws)
            outcome = await agent.step(job.tick, job.t)
            row.update(status=outcome.status, tools_called=outcome.tools_called, summary=outcome.summary,
                       turns=outcome.turns, env_calls=outcome.env_calls, error=outcome.error)
        except BudgetExhaustedError:
            span.set(status="budget_exhausted")  # nothing of it is packed; a resumed run steps it again
            return None
        except (EnvUnavailableError, StaleRunError):
            raise
        except ISOLATED as error:
            row.update(status="error", tools_called=[], turns=0, env_calls=0,
                       error=f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=3)}"[:2000])
            ws = None
            await job.proxy.env.discard_pending(agent_id)
        span.set(status=row["status"])
    row.update(usage_columns(agent), duration_ms=(time.perf_counter() - started) * 1000)
    calls = call_rows(agent.meter.records if agent else [], run=job.proxy.run_id, step=job.step, scope="tick")
    record = {"row": row, "calls": [{k: v for k, v in c.items() if k not in TEXT_KEYS} for c in calls],
              "attempt": job.attempt, "rolled_back": False, "episodes_from": episodes_from}
    if agent is not None and ws is not None:
        try:
            agent.commit_step(job.step, record)
            await agent.to_workspace()
            failpoint("mid_batch", step=job.step)
        except ISOLATED as error:
            row.update(status="error", error=f"persisting the workspace failed: {error}")
            ws = None
            await job.proxy.env.discard_pending(agent_id)
    shown = ws
    if shown is None:
        try:
            shown = packed.load(agent_id, job.packs[agent_id])
        except (PolisError, KeyError, OSError):
            shown = None
    memory = memory_row(shown, job.proxy.run_id, job.step, agent_id, episodes_from) if shown is not None else None
    return {**record, "calls": calls, "memory": memory, "workspace": ws}


def write_batch_pack(job: BatchJob, packed: PackedWorkspaces, results: list[dict[str, Any] | None]) -> tuple[str, tuple[str, ...]]:
    """Write the batch's pack: every agent of the job, stepped or as it was; returns its key and the packs it reads from.

    Raises:
        RunError: an agent that is neither stepped nor loadable (its pack is lost or corrupt): it is never
            packed as empty, so the tick fails and is not committed.
    """
    assert job.packs is not None
    writer = PackWriter(_pack_name(job), job.txn)
    reads: set[str] = {writer.name}
    for agent_id, result in zip(job.agent_ids, results, strict=True):
        ws = result.get("workspace") if result is not None else None
        if ws is None:
            try:
                ws = packed.load(agent_id, job.packs[agent_id])
            except (PolisError, KeyError, OSError) as error:
                raise RunError(f"agent {agent_id}'s workspace cannot be read from {job.packs.get(agent_id)}: {error}") from error
        try:
            reads |= packed.pack(writer, agent_id, ws).packs()
        except (PolisError, OSError) as error:
            raise RunError(f"agent {agent_id}'s workspace cannot be packed: {error}") from error
    writer.write(packed.store)
    return writer.name, tuple(sorted(reads))
