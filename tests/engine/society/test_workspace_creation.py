"""Creating a run's agent workspaces tells how many exist so far (the progress line's ``creating workspaces n/N``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.agent.workspace import workspace_path
from engine.society.workspaces.journaled import FolderAgents
from engine.society.workspaces.manifest import PackedAgents


def specs(n: int) -> list[dict[str, Any]]:
    return [{"id": i, "type": "PersonAgent", "profile": {"name": f"P{i}"}, "config": {}} for i in range(n)]


def test_packed_agents_count_their_workspaces_pack_by_pack(tmp_path: Path) -> None:
    seen: list[int] = []
    agents = PackedAgents(tmp_path)
    key = agents.open(None, specs(5), txn=0, batch_size=2, on_created=seen.append)
    assert seen == [0, 2, 4, 5]
    assert sorted(agents.packs_of(range(5))) == list(range(5))

    again: list[int] = []
    PackedAgents(tmp_path).open(key, specs(5), txn=0, batch_size=2, on_created=again.append)
    assert again == []  # a resumed run creates nothing: nothing to count


def test_folder_agents_count_every_batch_size_agents_those_already_there_included(tmp_path: Path) -> None:
    agents = FolderAgents(tmp_path, None)
    agents.open(None, specs(2), txn=0, batch_size=2)
    seen: list[int] = []
    agents.open(None, specs(5), txn=0, batch_size=2, on_created=seen.append)
    assert seen == [0, 2, 4, 5]
    assert all((workspace_path(tmp_path / "agents", i) / "config.json").exists() for i in range(5))
