"""Toolsets: groups of agent tools (files, TODO, skills, memory) that the ReAct loop offers.

A toolset is built for one agent when it is restored, owns the tools it lists, and keeps any
state it needs in the agent's workspace (loaded in its constructor, written in ``save``).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from engine.agent.tools import AgentTool

__all__ = ["Toolset"]


@runtime_checkable
class Toolset(Protocol):
    """What AgentBase needs from a group of tools."""

    def tools(self, *, readonly: bool) -> dict[str, AgentTool]:
        """The tools offered now (only read-only ones when ``readonly``)."""
        ...

    async def dispatch(self, name: str, args: dict[str, Any], *, readonly: bool) -> str:
        """Run tool ``name`` (one of :meth:`tools`) with validated ``args``; return text for the model.

        Expected failures (bad path, unknown id) come back as a message starting ``error:``, so
        the model can recover; nothing is raised for them.
        """
        ...

    def save(self) -> None:
        """Persist this toolset's state into the workspace (called from ``to_workspace``)."""
        ...
