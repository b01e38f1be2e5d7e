"""What every agent-step of a batch shares, whatever holds the workspaces: its job, its error isolation and its rows."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.agent.base import AgentBase
from engine.agent.memory.snapshot import episodes_offset, memory_snapshot
from engine.agent.packed import DEFAULT_CHECKPOINT_EVERY
from engine.agent.service_proxy import ServiceProxy
from engine.agent.workspace import AgentWorkspace
from engine.errors import PolisError
from engine.llm.budget import Allowance
from engine.tiers.plan import TierBatch

__all__ = ["ISOLATED", "BatchJob", "memory_row", "usage_columns"]

@dataclass(frozen=True)
class BatchJob:
    """One batch of one tick: what every agent-step of it is given."""

    agent_ids: tuple[int, ...]
    step: int  #: 1-based society step being run
    batch: int
    tick: int
    t: datetime  #: simulated time at the end of the step
    proxy: ServiceProxy
    allowance: Allowance | None = None  #: this batch's share of the remaining budget
    txn: int = 1  #: the society transaction this tick commits as
    attempt: str = ""  #: this attempt of the tick; commits from other attempts are rolled back
    session: str | None = None  #: the driver's lease session; a task of an older session writes nothing
    text_allowance: int | None = None  #: transcript text bytes this batch may keep; None: no transcripts
    snapshots_keep: int | None = 0  #: past ticks whose journals stay (the spec's ``snapshots.keep``; None: all)
    packs: Mapping[int, str] | None = None  #: packed runs: the pack holding each agent (None: one folder per agent)
    checkpoint_every: int = DEFAULT_CHECKPOINT_EVERY  #: packed runs: see :mod:`engine.agent.packed`
    #: the driver's live-count scope this batch publishes its calls and stepped agents under
    #: (:mod:`engine.society.run.live_calls`); None: nobody listens
    live_scope: str | None = None
    tiers: TierBatch | None = None  #: a batch of archetype or rule members (:mod:`engine.society.tiered.batch`)


#: What an agent-step may raise and still leave the batch going: the agent's row records it.
ISOLATED = (PolisError, OSError, ValueError, KeyError, TypeError, AttributeError, LookupError)


def usage_columns(agent: AgentBase | None) -> dict[str, Any]:
    """The ``actions`` row's LLM usage columns (zeros when the agent was never built)."""
    meter = agent.meter if agent is not None else None
    return {
        "llm_calls": meter.calls if meter else 0,
        "llm_failures": meter.failures if meter else 0,
        "input_tokens": meter.input_tokens if meter else 0,
        "output_tokens": meter.output_tokens if meter else 0,
        "llm_latency_ms": meter.latency_ms if meter else 0.0,
        "cost_usd": meter.cost_usd if meter else 0.0,
    }


def memory_row(ws: AgentWorkspace, run_id: str, step: int, agent_id: int, episodes_from: int | None) -> dict[str, Any] | None:
    """The agent's ``agent_memory`` row as its workspace holds it now (None: unreadable, so no row).

    ``episodes_from`` None: the step failed before it began, so it added no episodes."""
    try:
        offset = episodes_offset(ws) if episodes_from is None else episodes_from
        return {"run": run_id, "step": step, "agent_id": agent_id, **memory_snapshot(ws, offset)}
    except (OSError, ValueError, PolisError):
        return None
