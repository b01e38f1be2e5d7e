"""StepJournal: one agent-step is undoable whatever the runtime did to the workspace."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.agent.journal import StepJournal
from engine.agent.workspace import AgentWorkspace, DirWorkspace
from engine.errors import WorkspaceError
from engine.storage.atomic import atomic_write_text


def _snapshot(root: Path) -> dict[str, object]:
    out: dict[str, object] = {}
    for directory, _dirs, names in os.walk(root):
        if ".runtime/txn" in directory:
            continue
        for name in names:
            path = Path(directory) / name
            rel = str(path.relative_to(root))
            if rel.startswith(".runtime/txn"):
                continue
            out[rel] = ("link", os.readlink(path)) if path.is_symlink() else path.read_bytes()
    return out


@pytest.fixture
def ws(tmp_path: Path) -> AgentWorkspace:
    ws = DirWorkspace(tmp_path / "agent_0001")
    ws.make_dirs()
    ws.write_json("config.json", {"id": 1})
    ws.swap_json("AGENT.json", {"id": 1, "step_count": 0})
    ws.append_jsonl(".runtime/logs/step_replay.jsonl", [{"step": 0}])
    atomic_write_text(ws.root / "notes.md", "first\n")
    return ws


def test_rollback_undoes_appends_replacements_swaps_creations_and_deletions(ws: AgentWorkspace) -> None:
    before = _snapshot(ws.root)
    journal = StepJournal(ws.root)
    journal.begin(1)
    ws.swap_json("AGENT.json", {"id": 1, "step_count": 1})  # symlink swap; old version file unlinked
    ws.append_jsonl(".runtime/logs/step_replay.jsonl", [{"step": 1}])  # in-place append
    atomic_write_text(ws.root / "notes.md", "rewritten\n")  # replace by rename
    ws.append_jsonl("memory/episodes.jsonl", [{"e": 1}])  # a new file
    os.unlink(ws.root / "config.json")  # a deletion
    assert _snapshot(ws.root) != before
    journal.rollback(1)
    assert _snapshot(ws.root) == before
    assert ws.read_json("AGENT.json")["step_count"] == 0
    journal.rollback(1)  # idempotent
    assert _snapshot(ws.root) == before


def test_append_then_replace_of_the_same_file_is_undone(ws: AgentWorkspace) -> None:
    before = _snapshot(ws.root)
    journal = StepJournal(ws.root)
    journal.begin(3)
    ws.append_jsonl(".runtime/logs/step_replay.jsonl", [{"step": 3}])
    atomic_write_text(ws.root / ".runtime/logs/step_replay.jsonl", "compacted\n")
    journal.rollback(3)
    assert _snapshot(ws.root) == before


def test_begin_is_idempotent_and_discard_through_forgets_committed_steps(ws: AgentWorkspace) -> None:
    journal = StepJournal(ws.root)
    journal.begin(1)
    ws.append_jsonl(".runtime/logs/step_replay.jsonl", [{"step": 1}])
    journal.begin(1)  # must not re-record the modified state
    journal.rollback(1)
    assert (ws.root / ".runtime/logs/step_replay.jsonl").read_text().count("\n") == 1
    journal.begin(2)
    assert journal.steps() == [1, 2]
    journal.discard_through(1)
    assert journal.steps() == [2]


def test_a_crashed_begin_leaves_nothing_that_counts(ws: AgentWorkspace) -> None:
    journal = StepJournal(ws.root)
    journal.dir.mkdir(parents=True)
    os.link(ws.root / "config.json", journal.dir / "step_000004.f0")  # links written, manifest never
    assert journal.steps() == [] and not journal.has(4)
    with pytest.raises(WorkspaceError, match="no usable journal for step 4"):
        journal.rollback(4)
    journal.begin(4)  # a later begin of the same step reuses the name
    assert journal.has(4)
    journal.discard_through(4)
    assert list(journal.dir.iterdir()) == []
