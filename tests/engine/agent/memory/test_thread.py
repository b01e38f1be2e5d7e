"""ThreadMemory: the window, compaction into AGENT_MEMORY.md under its limit, failures that keep the turns."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from engine.agent.memory.thread import (
    COMPACT_PROMPT,
    COMPACTION_LOG,
    MEMORY_FILE,
    SESSION_FILE,
    MemoryConfig,
    ThreadMemory,
    fit_paragraphs,
)
from engine.agent.workspace import AgentWorkspace, DirWorkspace
from engine.errors import LLMCallError, SpecError
from engine.llm.backends.scripted import ScriptedModel
from engine.llm.meter import Meter, MeteredModel
from engine.llm.protocol import ChatResult

T = datetime(2024, 1, 1, 9, 0)


class FailingModel:
    """A model whose every call fails after its retries."""

    def __init__(self) -> None:
        self.calls = 0

    async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        self.calls += 1
        raise LLMCallError("provider down", status=503)


@pytest.fixture
def ws(tmp_path: Path) -> AgentWorkspace:
    workspace = DirWorkspace(tmp_path / "agent_0001")
    workspace.make_dirs()
    return workspace


def turns(n: int, size: int = 100, start: int = 0) -> list[dict[str, Any]]:
    return [
        {"t": T.isoformat(), "role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "x" * size}
        for i in range(start, start + n)
    ]


def log(ws: AgentWorkspace) -> list[dict[str, Any]]:
    path = ws.root / COMPACTION_LOG
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


async def test_no_compaction_while_the_thread_is_under_max_chars(ws: AgentWorkspace) -> None:
    llm = ScriptedModel([])
    memory = ThreadMemory(ws, llm, window_turns=4, max_chars=5000)
    memory.append(turns(10))

    assert await memory.maybe_compact(t=T) is None
    assert llm.requests == []
    assert len(memory.turns) == 10
    assert not (ws.root / MEMORY_FILE).exists()


async def test_compaction_fires_once_the_thread_exceeds_max_chars_with_one_call(ws: AgentWorkspace) -> None:
    meter = Meter()
    llm = ScriptedModel([{"summary": "Met agent 2 for lunch; promised to call back on Friday."}])
    memory = ThreadMemory(ws, MeteredModel(llm, meter, caller="agent:1"), window_turns=4, max_chars=1000)
    memory.append(turns(12))  # 12 turns of ~110 chars: over 1000

    result = await memory.maybe_compact(t=T)

    assert result is not None and result.status == "ok"
    assert result.turns_compacted == 8
    assert [turn["content"][:7] for turn in memory.turns] == ["turn 8 ", "turn 9 ", "turn 10", "turn 11"]
    assert memory.chars() <= 1000
    assert (ws.root / MEMORY_FILE).read_text() == "Met agent 2 for lunch; promised to call back on Friday."
    assert memory.summary() == "Met agent 2 for lunch; promised to call back on Friday."
    assert len(llm.requests) == 1
    assert llm.requests[0]["prompt"] == COMPACT_PROMPT.id
    prompt = llm.requests[0]["messages"][0]["content"]
    assert "turn 0 " in prompt and "turn 7 " in prompt and "turn 8 " not in prompt
    assert [r.prompt_name for r in meter.records] == ["memory.compact"]
    assert log(ws)[0]["status"] == "ok" and log(ws)[0]["t"] == T.isoformat()
    # A second check right after: the thread is short again, nothing to do.
    assert await memory.maybe_compact(t=T) is None


async def test_agent_memory_stays_under_its_limit_across_many_compactions(ws: AgentWorkspace) -> None:
    limit = 1000
    # The model keeps everything and adds a paragraph each time, ignoring the limit.
    replies = [{"summary": "\n\n".join(f"paragraph {j}: " + "y" * 280 for j in range(i + 1))} for i in range(30)]
    llm = ScriptedModel(replies)
    memory = ThreadMemory(ws, llm, window_turns=2, max_chars=600, memory_limit_chars=limit)

    results = []
    for round_ in range(30):
        memory.append(turns(6, start=round_ * 6))
        result = await memory.maybe_compact(t=T)
        assert result is not None and result.status == "ok"
        results.append(result)
        assert len((ws.root / MEMORY_FILE).read_text(encoding="utf-8")) <= limit

    assert len(llm.requests) == 30
    text = (ws.root / MEMORY_FILE).read_text()
    assert text.startswith("paragraph 27:") and text.endswith("paragraph 29: " + "y" * 280)  # the newest kept
    assert results[-1].dropped[0].startswith("paragraph 0:")  # the oldest dropped, and logged
    assert log(ws)[-1]["dropped"] == results[-1].dropped
    # Once the memory is nearly full, the prompt asks the model to fit.
    assert not results[0].asked_to_fit and results[-1].asked_to_fit
    assert "condense" in llm.requests[-1]["messages"][0]["content"]
    assert "paragraph 28:" in llm.requests[-1]["messages"][0]["content"]  # the current memory goes to the model


async def test_a_failed_compaction_call_keeps_the_turns_and_records_the_failure(ws: AgentWorkspace) -> None:
    llm = FailingModel()
    memory = ThreadMemory(ws, llm, window_turns=2, max_chars=300)
    memory.append(turns(8))

    result = await memory.maybe_compact(t=T)

    assert result is not None and result.status == "failed"
    assert "provider down" in (result.error or "")
    assert llm.calls == 1
    assert len(memory.turns) == 8
    assert not (ws.root / MEMORY_FILE).exists()
    assert log(ws)[0]["status"] == "failed" and log(ws)[0]["turns_compacted"] == 0


async def test_an_unparseable_compaction_keeps_the_turns_and_the_old_memory(ws: AgentWorkspace) -> None:
    (ws.root / MEMORY_FILE).write_text("Earlier: moved to town.")
    llm = ScriptedModel(["I summarised it.", '{"text": "wrong field"}'])
    memory = ThreadMemory(ws, llm, window_turns=2, max_chars=300)
    memory.append(turns(8))

    result = await memory.maybe_compact(t=T)

    assert result is not None and result.status == "failed"
    assert "no valid Compaction after 2 attempts" in (result.error or "")
    assert len(llm.requests) == 2  # the parse retry fed the error back once
    assert len(memory.turns) == 8
    assert memory.summary() == "Earlier: moved to town."


async def test_a_window_longer_than_max_chars_is_compacted_down_to_fit(ws: AgentWorkspace) -> None:
    memory = ThreadMemory(ws, ScriptedModel([{"summary": "s"}]), window_turns=12, max_chars=500)
    memory.append(turns(6, size=200))

    result = await memory.maybe_compact()

    assert result is not None and result.turns_compacted == 4
    assert len(memory.turns) == 2 and memory.chars() <= 500


def test_fit_paragraphs_drops_the_oldest_and_cuts_a_lone_paragraph_from_the_front() -> None:
    assert fit_paragraphs("a\n\nb\n\nc", 4) == ("b\n\nc", ["a"])
    text, dropped = fit_paragraphs("0123456789", 4)
    assert (text, dropped) == ("6789", ["012345"])
    assert fit_paragraphs("short", 100) == ("short", [])


async def test_the_window_persists_across_save_and_reload_and_other_session_keys_survive(ws: AgentWorkspace) -> None:
    ws.write_json(SESSION_FILE, {"active_skills": ["planning"]})
    memory = ThreadMemory(ws, ScriptedModel([]))
    memory.append([{"role": "system", "content": "rebuilt each step"}, *turns(3)])
    memory.save()

    again = ThreadMemory(ws, ScriptedModel([]))

    assert [turn["content"][:6] for turn in again.turns] == ["turn 0", "turn 1", "turn 2"]
    assert again.context()[0] == {"role": "user", "content": "turn 0 " + "x" * 100}
    assert ws.read_json(SESSION_FILE)["active_skills"] == ["planning"]


def test_settings_come_from_config_memory_and_bad_ones_are_spec_errors(ws: AgentWorkspace) -> None:
    config = {"memory": {"window_turns": 3, "max_chars": 900, "memory_limit_chars": 300}}
    memory = ThreadMemory.from_config(ws, ScriptedModel([]), config)
    assert (memory.window_turns, memory.max_chars, memory.memory_limit_chars) == (3, 900, 300)
    assert MemoryConfig.from_agent_config({}) == MemoryConfig()
    with pytest.raises(SpecError, match="config.memory"):
        MemoryConfig.from_agent_config({"memory": {"max_char": 10}})
    with pytest.raises(SpecError, match="config.memory"):
        MemoryConfig.from_agent_config({"memory": {"memory_limit_chars": 0}})
