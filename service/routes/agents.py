"""``GET /experiments/{id}/agents/{agent_id}``: one agent of an experiment and its memory as of a step."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from service.agents import read_agent
from service.auth import Caller
from service.schemas import AgentMemory
from service.state import State

__all__ = ["router"]

router = APIRouter(prefix="/experiments", tags=["results"])


# A plain ``def`` route: the DuckDB read runs in the threadpool, off the event loop (as the results routes).
@router.get("/{experiment_id}/agents/{agent_id}", response_model=AgentMemory)
def get_agent(
    experiment_id: str,
    agent_id: int,
    state: State,
    caller: Caller,
    step: Annotated[int | None, Query(ge=0, description="the society step (default: the agent's last committed one)")] = None,
) -> AgentMemory:
    """The agent's type, profile and config, and its memory as of ``step``: ``AGENT_MEMORY.md`` and its
    TODO list from the last committed step at or before it, and every episode it stored up to it."""
    record = state.registry.get(experiment_id, caller)
    return read_agent(record.id, record.run_dir, agent_id, step, state.query_limits)
