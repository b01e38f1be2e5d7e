"""What every agent-step of a batch shares, whatever holds the workspaces: its error isolation and its rows."""

from __future__ import annotations

from typing import Any

from engine.agent.base import AgentBase
from engine.agent.memory.snapshot import episodes_offset, memory_snapshot
from engine.agent.workspace import AgentWorkspace
from engine.errors import PolisError

__all__ = ["ISOLATED", "memory_row", "usage_columns"]

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
