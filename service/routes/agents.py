"""``GET /experiments/{id}/agents/{agent_id}``: one agent of an experiment and its memory as of a step; ``.../files``:
its workspace's files, as the run stands or as a kept tick left them."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Response

from engine.api import list_agent_files, read_agent, read_agent_file
from service.admission.auth import Caller
from service.schemas import AgentFiles, AgentMemory
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


_KEPT_TICK = Query(ge=0, description="a kept tick (default: the workspace as the run stands)")


@router.get("/{experiment_id}/agents/{agent_id}/files", response_model=AgentFiles)
def get_agent_files(experiment_id: str, agent_id: int, state: State, caller: Caller,
                    step: Annotated[int | None, _KEPT_TICK] = None) -> AgentFiles:
    """Every file of the agent's workspace with its size, whatever keeps it (packs or a folder)."""
    record = state.registry.get(experiment_id, caller)
    return list_agent_files(record.id, record.run_dir, agent_id, step)


@router.get("/{experiment_id}/agents/{agent_id}/files/{path:path}", response_class=Response,
            responses={200: {"content": {"application/octet-stream": {}}}})
def get_agent_file(experiment_id: str, agent_id: int, path: str, state: State, caller: Caller,
                   step: Annotated[int | None, _KEPT_TICK] = None) -> Response:
    """One file of the agent's workspace, as bytes (``memory/episodes.jsonl``, ``AGENT.json`` ...)."""
    record = state.registry.get(experiment_id, caller)
    return Response(read_agent_file(record.id, record.run_dir, agent_id, path, step), media_type="application/octet-stream")
