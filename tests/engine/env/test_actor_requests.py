"""The env actor serves EnvRequests without converting them: the router gets the request, the caller its reply."""

from __future__ import annotations

from datetime import datetime

import pytest

from engine.env.actor import EnvRouterActor, EnvRouterConfig
from engine.env.requests import EnvReply, EnvRequest, ToolCall
from engine.env.scripted import ScriptedEnv

START = datetime(2026, 1, 1, 8)


@pytest.fixture
async def actor() -> EnvRouterActor:
    actor = EnvRouterActor(EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react"))
    await actor.init(START, [1, 2, 3])
    return actor


async def test_an_ask_reaches_the_router_as_sent_and_its_reply_comes_back_whole(actor, monkeypatch) -> None:
    reply = EnvReply("sent", "success", (ToolCall("send_message", {"agent_id": 1, "to_agent_id": 2, "content": "hi"}, "queued", True),),
                     module="MessagingSpace")
    router = ScriptedEnv([reply])
    monkeypatch.setattr(actor.router, "ask", router.ask)
    request = EnvRequest("ask", 1, "tell agent {agent} {text}", True, "trace-1", "span-1",
                         template_mode=True, variables={"agent": 2, "text": "hi"})

    assert await actor.ask_many([request]) == [reply]

    assert router.requests == [request]
    [span] = [s for s in actor._trace.spans() if s.name == "env.ask"]
    assert (span.trace_id, span.parent_id, span.attrs["agent_id"]) == ("trace-1", "span-1", 1)


async def test_a_call_tool_reply_names_its_call_whether_it_ran_or_was_refused(actor) -> None:
    ran, refused = await actor.ask_many([
        EnvRequest("call_tool", 1, "send_message", arguments={"agent_id": 1, "to_agent_id": 2, "content": "hi"}),
        EnvRequest("call_tool", 1, "send_message", arguments={"agent_id": 1, "to_agent_id": 9, "content": "hi"}),
    ])

    assert ran == EnvReply("message to agent 2 queued for delivery", "success", (ToolCall(
        "send_message", {"agent_id": 1, "to_agent_id": 2, "content": "hi"}, "message to agent 2 queued for delivery", True),),
        "message to agent 2 queued for delivery")
    assert refused.status == "fail" and refused.tools == ("send_message",) and refused.calls[0].ok is False
    assert refused.calls[0].result == refused.answer and "there is no agent 9" in refused.answer


async def test_a_raising_ask_is_answered_with_an_error_reply_that_names_no_call(actor, monkeypatch) -> None:
    async def broken(request: EnvRequest) -> EnvReply:
        raise RuntimeError("router bug")

    monkeypatch.setattr(actor.router, "ask", broken)
    [reply] = await actor.ask_many([EnvRequest("ask", 1, "anything")])
    assert (reply.status, reply.calls) == ("error", ())
    assert reply.answer == "error: the environment failed on this ask request (RuntimeError: router bug)"


async def test_serve_direct_answers_each_request_alike_without_a_span_or_task_each(actor, monkeypatch) -> None:
    observe = EnvRequest("observe", 2, readonly=True)
    send = EnvRequest("call_tool", 1, "send_message", arguments={"agent_id": 1, "to_agent_id": 2, "content": "hi"})
    refused = EnvRequest("call_tool", 1, "send_message", arguments={"agent_id": 1, "to_agent_id": 9, "content": "hi"})
    routed = await actor.ask_many([observe, send, refused])
    await actor.router.discard_pending(1)
    actor.router.drain_tool_calls()
    actor._trace.drain()

    direct = await actor.serve_direct([observe, send, refused, EnvRequest("ask", 1, "tell agent 2 hi")])

    assert direct[:3] == routed  # the same replies as ask_many gives
    assert direct[3].status == "error" and "routed by ask_many" in direct[3].answer  # an ask needs the router's LLM
    assert actor._trace.spans() == []  # no span per request
    history = actor.router.get_tool_call_history()
    assert [(r["function_name"], r["agent_id"], r["span_id"]) for r in history] == [
        ("read_inbox", 2, None), ("send_message", 1, None), ("send_message", 1, None)]  # still env_tool_calls rows

    async def broken(agent_id: int) -> str:
        raise RuntimeError("module bug")

    monkeypatch.setattr(actor.router, "observe", broken)
    failed, sent = await actor.serve_direct([observe, send])
    assert failed.status == "error" and "RuntimeError: module bug" in failed.answer  # only its own request fails
    assert sent.status == "success"
