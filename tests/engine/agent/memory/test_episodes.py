"""EpisodeStore: typed episodes appended by finish, searched by words, read back in order."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from engine.agent.memory.episodes import EPISODES_FILE, EpisodeIn, EpisodeStore, FinishWithMemories
from engine.agent.tools import FinishArgs
from engine.agent.workspace import DirWorkspace
from engine.llm.decision import build_decision_model

T1 = datetime(2024, 1, 1, 9, 0)
T2 = datetime(2024, 1, 1, 10, 0)


@pytest.fixture
def store(tmp_path: Path) -> EpisodeStore:
    workspace = DirWorkspace(tmp_path / "agent_0001")
    workspace.make_dirs()
    return EpisodeStore(workspace)


def fill(store: EpisodeStore) -> None:
    store.finish([
        EpisodeIn(kind="social", text="Had lunch with Bob at the cafe", importance=3),
        {"kind": "place", "text": "The cafe on Main Street closes at noon"},
    ], t=T1, step=1)
    store.finish([
        {"kind": "commitment", "text": "Promised Bob to help him move on Saturday", "importance": 5},
        {"kind": "feeling", "text": "Tired after work", "importance": 2},
    ], t=T2, step=2)


def test_finish_appends_typed_episodes_with_time_and_step(store: EpisodeStore) -> None:
    fill(store)

    lines = [json.loads(line) for line in (store.workspace.root / EPISODES_FILE).read_text().splitlines()]

    assert len(lines) == 4
    assert lines[0] == {"kind": "social", "text": "Had lunch with Bob at the cafe", "importance": 3,
                        "t": "2024-01-01T09:00:00", "step": 1}
    assert lines[1]["importance"] == 3  # the default
    assert [e.kind for e in store.all()] == ["social", "place", "commitment", "feeling"]


def test_finish_with_no_memories_writes_nothing(store: EpisodeStore) -> None:
    assert store.finish([], t=T1, step=1) == []
    assert not (store.workspace.root / EPISODES_FILE).exists()
    assert store.recent() == [] and store.search("anything") == []


def test_finish_rejects_an_unknown_kind_or_importance(store: EpisodeStore) -> None:
    with pytest.raises(ValidationError):
        store.finish([{"kind": "dream", "text": "flying"}])
    with pytest.raises(ValidationError):
        store.finish([{"kind": "fact", "text": "x", "importance": 9}])


def test_search_ranks_by_shared_words_then_importance_then_recency(store: EpisodeStore) -> None:
    fill(store)

    assert [e.text for e in store.search("Bob cafe")] == [
        "Had lunch with Bob at the cafe",
        "Promised Bob to help him move on Saturday",  # one word, importance 5
        "The cafe on Main Street closes at noon",  # one word, importance 3
    ]
    assert [e.kind for e in store.search("bob", kind="commitment")] == ["commitment"]
    assert store.search("bob", limit=1)[0].kind == "commitment"
    assert store.search("unrelated words") == []
    assert store.search("Bob cafe") == store.search("Bob cafe")  # deterministic


def test_an_empty_query_returns_the_newest_first(store: EpisodeStore) -> None:
    fill(store)
    assert [e.kind for e in store.search("", limit=2)] == ["feeling", "commitment"]


def test_recent_returns_the_last_n_oldest_first(store: EpisodeStore) -> None:
    fill(store)
    assert [e.kind for e in store.recent(2)] == ["commitment", "feeling"]
    assert [e.kind for e in store.recent(10, kind="place")] == ["place"]
    assert store.recent(0) == []


def test_a_torn_last_line_is_skipped_not_fatal(store: EpisodeStore) -> None:
    fill(store)
    with open(store.workspace.root / EPISODES_FILE, "a", encoding="utf-8") as handle:
        handle.write('{"kind": "fact", "te')

    assert len(store.all()) == 4
    assert store.skipped == 1


def test_finish_with_memories_extends_finish_args_and_builds_a_decision_schema() -> None:
    assert set(FinishArgs.model_fields) < set(FinishWithMemories.model_fields)
    assert FinishWithMemories(summary="ok").memories == []
    parsed = FinishWithMemories.model_validate({"summary": "ok", "memories": [{"kind": "fact", "text": "Rent is due"}]})
    assert parsed.memories[0].importance == 3

    decision = build_decision_model("D", {"finish": FinishWithMemories}, stop_field="finish", stop_help="end")
    value = decision.model_validate_json(json.dumps({
        "thought": "t", "finish": True,
        "action": {"tool": "finish", "arguments": {"summary": "s", "memories": [{"kind": "social", "text": "met Ann", "importance": 4}]}},
    }))
    assert value.action.arguments.memories[0].text == "met Ann"  # type: ignore[attr-defined]
    with pytest.raises(ValidationError):
        FinishWithMemories.model_validate({"summary": "s", "extra": 1})
