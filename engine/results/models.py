"""What reading a run gives back: its datasets' descriptions, and one agent's files and memory.

These are pydantic models because the service answers them as they are (``GET /experiments/{id}/datasets``,
``.../agents/{agent_id}``); a local :class:`polis.Run` returns the same ones.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

__all__ = ["AgentFile", "AgentFiles", "AgentMemory", "ColumnInfo", "DatasetInfo"]


class ColumnInfo(BaseModel):
    """One column of a dataset."""

    name: str
    type: str
    description: str


class DatasetInfo(BaseModel):
    """One dataset of a run's replay: what it holds and how many rows are committed so far."""

    name: str
    kind: str
    description: str
    rows: int
    columns: list[ColumnInfo]


class AgentFile(BaseModel):
    """One file of an agent's workspace."""

    path: str  #: relative to the workspace (``memory/episodes.jsonl``)
    size: int  #: bytes


class AgentFiles(BaseModel):
    """Every file of an agent's workspace, as the run stands or as a kept tick left it."""

    experiment_id: str
    agent_id: int
    step: int | None  #: the kept tick asked for (null: as the run stands)
    files: list[AgentFile]


class AgentMemory(BaseModel):
    """One agent of an experiment: who it is, and what it remembered as of one step."""

    experiment_id: str
    agent_id: int
    #: The step asked for; by default the agent's last committed step (0 before its first).
    step: int
    type: str  #: the registered agent type
    profile: dict[str, Any]
    config: dict[str, Any]
    #: ``AGENT_MEMORY.md`` as of ``step`` (null: none yet).
    memory: str | None
    #: The TODO list (``state/todo.json``) as of ``step`` (null: none).
    todo: dict[str, Any] | None
    #: Every episode the agent stored up to ``step``, oldest first.
    episodes: list[dict[str, Any]]
