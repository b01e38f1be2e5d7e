"""The env's tool calls become the ``env_tool_calls`` dataset; the actor keeps one step of them."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path

from engine.env.actor import EnvRouterActor, EnvRouterConfig
from engine.env.control import EndTick, TickEnd
from engine.env.module_datasets import module_datasets
from engine.env.modules.messaging import MessagingSpace
from engine.env.requests import EnvRequest
from engine.env.tool_calls import ENV_TOOL_CALLS, RESULT_CHARS, summarize_result
from engine.storage.catalog import Catalog
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import run_store
from engine.storage.staging import commit_staged
from engine.trace import new_trace_id

START = datetime(2026, 1, 1, 8)


def _send(sender: int, to: int, content: str = "hi", trace_id: str | None = None) -> EnvRequest:
    return EnvRequest("call_tool", sender, "send_message", arguments={"agent_id": sender, "to_agent_id": to, "content": content},
                      trace_id=trace_id, parent_span_id="0123456789abcdef" if trace_id else None)


async def _actor(run_dir: Path) -> EnvRouterActor:
    actor = EnvRouterActor(EnvRouterConfig(modules=(("MessagingSpace", {}),), run_dir=run_dir))
    await actor.init(START, list(range(10)))
    for schema in module_datasets([MessagingSpace]):  # what the society registers for its modules
        Catalog(run_dir / "replay").register(schema)
    return actor


async def _step(actor: EnvRouterActor, step: int) -> TickEnd:
    result = await actor.end_tick(EndTick(step, 600, START + timedelta(minutes=10 * step), step, "run-1"))
    commit_staged(run_store(actor.config.run_dir), result.staged)  # what the society's commit does after its commit point
    return result


def test_a_long_result_is_cut_to_result_chars_and_keeps_its_full_length() -> None:
    text, chars = summarize_result("x" * 2000)
    assert chars == 2002 and len(text) == RESULT_CHARS + 1 and text.startswith('"xxx') and text.endswith("…")
    assert summarize_result({"b": 1, "a": [1, 2]}) == ('{"a": [1, 2], "b": 1}', 21)


async def test_each_env_step_writes_one_row_per_tool_call_and_forgets_them(tmp_path: Path) -> None:
    actor = await _actor(tmp_path)
    traced = new_trace_id()
    replies = await actor.ask_many([_send(1, 2, trace_id=traced), _send(3, 4), EnvRequest("observe", 2, ""),
                                    _send(5, 99)])  # agent 99 does not exist: a failed call is a row too
    assert [r.status for r in replies] == ["success", "success", "success", "fail"]
    assert len(actor.router.get_tool_call_history()) == 4
    first = await _step(actor, 1)
    assert actor.router.get_tool_call_history() == []  # the actor holds no step it has written

    await actor.ask_many([EnvRequest("observe", 4, ""), EnvRequest("call_tool", 6, "message_statistics", arguments={})])
    assert [r["function_name"] for r in actor.router.get_tool_call_history()] == ["read_inbox", "message_statistics"]
    second = await _step(actor, 2)
    await _step(actor, 3)  # a step without calls writes no shard

    assert (first.counts["env_tool_calls"], second.counts["env_tool_calls"]) == (4, 2)
    with ReplayReader(tmp_path) as reader:
        rows = reader.query("SELECT * FROM env_tool_calls ORDER BY step, seq").to_pylist()
        spans = {r["span_id"]: r for r in reader.query("SELECT span_id, trace_id, attrs FROM spans WHERE name = 'env.ask'").to_pylist()}
        described = reader.schema("env_tool_calls")
    assert described == ENV_TOOL_CALLS and all(c.description for c in described.columns)
    assert [(r["step"], r["seq"], r["tool"], r["agent_id"], r["ok"]) for r in rows] == [
        (1, 0, "send_message", 1, True), (1, 1, "send_message", 3, True), (1, 2, "read_inbox", 2, True),
        (1, 3, "send_message", 5, False), (2, 0, "read_inbox", 4, True), (2, 1, "message_statistics", 6, True),
    ]
    sent, failed, stats = rows[0], rows[3], rows[5]
    assert json.loads(sent["arguments"]) == {"agent_id": 1, "to_agent_id": 2, "content": "hi"}
    assert json.loads(sent["result"]) == replies[0].value and sent["result_chars"] == len(sent["result"])
    assert failed["result"] is None and "there is no agent 99" in failed["error"]
    assert json.loads(stats["arguments"]) == {}  # no agent_id argument: the agent served is the caller
    # every call names the actor's env.ask span it ran in, and that span's trace (the request's, when it had one)
    assert all(spans[r["span_id"]]["trace_id"] == r["trace_id"] for r in rows)
    assert sent["trace_id"] == traced and rows[1]["trace_id"] != traced


async def test_an_undone_agent_steps_calls_are_dropped_with_its_queued_updates(tmp_path: Path) -> None:
    actor = await _actor(tmp_path)
    await actor.ask_many([_send(1, 2, "first try"), _send(3, 2), EnvRequest("observe", 1, "")])
    [reply] = await actor.ask_many([EnvRequest("discard", 1, "")])  # agent 1's step is re-run
    assert reply.value == 1
    assert [r["agent_id"] for r in actor.router.get_tool_call_history()] == [3]
    await actor.ask_many([_send(1, 2, "second try")])
    await _step(actor, 1)

    with ReplayReader(tmp_path) as reader:
        rows = reader.query("SELECT agent_id, arguments ->> 'content' AS content FROM env_tool_calls ORDER BY seq").to_pylist()
        delivered = reader.query("SELECT sender, content FROM messages ORDER BY sender").to_pylist()
    assert rows == [{"agent_id": 3, "content": "hi"}, {"agent_id": 1, "content": "second try"}]
    assert delivered == [{"sender": 1, "content": "second try"}, {"sender": 3, "content": "hi"}]


async def test_without_a_run_directory_the_step_still_forgets_its_calls() -> None:
    actor = EnvRouterActor(EnvRouterConfig(modules=(("MessagingSpace", {}),)))
    await actor.init(START, list(range(4)))
    await actor.ask_many([_send(1, 2), EnvRequest("observe", 2, "")])
    result = await actor.end_tick(EndTick(1, 600, START, 1, "run-1"))
    assert result.counts == {} and actor.router.get_tool_call_history() == []
