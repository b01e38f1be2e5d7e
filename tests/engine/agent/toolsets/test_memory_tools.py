"""MemoryTools: memory_search, memory_recent and memory_read_summary over a workspace."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from engine.agent.memory.episodes import EpisodeStore
from engine.agent.memory.thread import MEMORY_FILE
from engine.agent.toolset import Toolset
from engine.agent.toolsets.memory import MemoryTools
from engine.agent.workspace import AgentWorkspace, DirWorkspace

T = datetime(2024, 1, 1, 9, 0)


@pytest.fixture
def ws(tmp_path: Path) -> AgentWorkspace:
    workspace = DirWorkspace(tmp_path / "agent_0001")
    workspace.make_dirs()
    EpisodeStore(workspace).finish([
        {"kind": "social", "text": "Had lunch with Bob", "importance": 4},
        {"kind": "place", "text": "The library opens at nine"},
    ], t=T, step=3)
    return workspace


def test_memory_tools_is_a_readonly_toolset(ws: AgentWorkspace) -> None:
    tools = MemoryTools(ws)
    assert isinstance(tools, Toolset)
    assert set(tools.tools(readonly=True)) == {"memory_search", "memory_recent", "memory_read_summary"}
    assert tools.tools(readonly=False) == tools.tools(readonly=True)
    assert all(tool.readonly for tool in tools.tools(readonly=False).values())


async def test_memory_search_finds_by_words_and_kind(ws: AgentWorkspace) -> None:
    tools = MemoryTools(ws)

    found = await tools.dispatch("memory_search", {"query": "lunch Bob", "kind": None, "limit": 10}, readonly=True)
    assert found == "- [social, importance 4, 2024-01-01T09:00:00, step 3] Had lunch with Bob"
    none = await tools.dispatch("memory_search", {"query": "Bob", "kind": "place", "limit": 10}, readonly=True)
    assert none == "no memories match 'Bob' (kind place)"


async def test_memory_recent_lists_the_latest(ws: AgentWorkspace) -> None:
    tools = MemoryTools(ws)
    assert (await tools.dispatch("memory_recent", {"n": 1}, readonly=True)).endswith("The library opens at nine")
    assert len((await tools.dispatch("memory_recent", {}, readonly=True)).splitlines()) == 2


async def test_memory_recent_sees_episodes_written_through_another_store(ws: AgentWorkspace) -> None:
    tools = MemoryTools(ws)
    EpisodeStore(ws).finish([{"kind": "fact", "text": "Rent is due on the first"}], t=T, step=4)
    assert "Rent is due" in await tools.dispatch("memory_recent", {"n": 1}, readonly=True)


async def test_memory_read_summary_reads_agent_memory(ws: AgentWorkspace) -> None:
    tools = MemoryTools(ws)
    assert await tools.dispatch("memory_read_summary", {}, readonly=True) == "your long-term memory is empty"
    (ws.root / MEMORY_FILE).write_text("Moved to town in spring.")
    assert await tools.dispatch("memory_read_summary", {}, readonly=True) == "Moved to town in spring."


async def test_an_empty_workspace_answers_plainly(tmp_path: Path) -> None:
    workspace = DirWorkspace(tmp_path / "agent_0002")
    workspace.make_dirs()
    tools = MemoryTools(workspace)
    assert await tools.dispatch("memory_recent", {"n": 5}, readonly=True) == "no memories yet"
    assert await tools.dispatch("memory_search", {"query": "x"}, readonly=True) == "no memories match 'x'"
    assert (await tools.dispatch("memory_forget", {}, readonly=True)).startswith("error:")
