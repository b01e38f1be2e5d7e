"""MemoryTools: read-only tools over the agent's episodes and its compacted memory."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from engine.agent.memory.episodes import Episode, EpisodeKind, EpisodeStore
from engine.agent.memory.thread import read_memory_summary
from engine.agent.tools import AgentTool
from engine.agent.workspace import AgentWorkspace

__all__ = ["MEMORY_READ_SUMMARY", "MEMORY_RECENT", "MEMORY_SEARCH", "MemoryReadSummaryArgs", "MemoryRecentArgs",
           "MemorySearchArgs", "MemoryTools", "format_episodes"]


class MemorySearchArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    query: str = Field(max_length=200, description="words to look for in your memories")
    kind: EpisodeKind | None = Field(default=None, description="only memories of this kind")
    limit: int = Field(default=10, ge=1, le=50, description="at most this many")


class MemoryRecentArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    n: int = Field(default=10, ge=1, le=50, description="how many of the latest memories")


class MemoryReadSummaryArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")


MEMORY_SEARCH = AgentTool("memory_search", "Search your remembered episodes by words (optionally of one kind)", MemorySearchArgs, readonly=True)
MEMORY_RECENT = AgentTool("memory_recent", "Your most recent remembered episodes", MemoryRecentArgs, readonly=True)
MEMORY_READ_SUMMARY = AgentTool(
    "memory_read_summary", "Read your long-term memory summary (AGENT_MEMORY.md)", MemoryReadSummaryArgs, readonly=True
)
_TOOLS = {t.name: t for t in (MEMORY_SEARCH, MEMORY_RECENT, MEMORY_READ_SUMMARY)}


def format_episodes(episodes: list[Episode]) -> str:
    """One line per episode: ``- [kind, importance N, time, step S] text``."""
    return "\n".join(
        f"- [{e.kind}, importance {e.importance}" + (f", {e.t.isoformat()}" if e.t else "") + f", step {e.step}] {e.text}"
        for e in episodes
    )


class MemoryTools:
    """The ``memory_*`` toolset (all read-only, so also offered in asks).

    Args:
        workspace: the agent's workspace.
        episodes: the store to read (default: a new one over ``workspace``).
    """

    def __init__(self, workspace: AgentWorkspace, episodes: EpisodeStore | None = None) -> None:
        self.workspace = workspace
        self.episodes = episodes or EpisodeStore(workspace)

    def tools(self, *, readonly: bool) -> dict[str, AgentTool]:
        return dict(_TOOLS)

    async def dispatch(self, name: str, args: dict[str, Any], *, readonly: bool) -> str:
        if name == MEMORY_SEARCH.name:
            query = MemorySearchArgs.model_validate(args)
            found = self.episodes.search(query.query, kind=query.kind, limit=query.limit)
            return format_episodes(found) if found else f"no memories match {query.query!r}" + (f" (kind {query.kind})" if query.kind else "")
        if name == MEMORY_RECENT.name:
            recent = self.episodes.recent(MemoryRecentArgs.model_validate(args).n)
            return format_episodes(recent) if recent else "no memories yet"
        if name == MEMORY_READ_SUMMARY.name:
            return read_memory_summary(self.workspace) or "your long-term memory is empty"
        return f"error: {name!r} is not a memory tool"

    def save(self) -> None:
        """Nothing to save: episodes are appended when a step finishes."""
