"""ReActRouter turns scripted LLM decisions into tool calls, retries invalid ones, honours readonly."""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import Any

from engine.env.base import EnvBase
from engine.env.modules.messaging import MessagingSpace
from engine.env.requests import EnvRequest, ToolCall
from engine.env.routers.react import ReActRouter
from engine.env.tool import tool
from engine.llm.backends.scripted import ScriptedModel

T1 = datetime(2024, 1, 1, 8, 15)


def decision(tool_name: str, arguments: dict[str, Any], *, done: bool = True, thought: str = "ok") -> dict[str, Any]:
    return {"thought": thought, "action": {"tool": tool_name, "arguments": arguments}, "done": done}


def offered_tools(request: dict[str, Any]) -> set[str]:
    """The tool names a request's JSON-schema decision allows."""
    schema = request["response_format"]["json_schema"]["schema"]
    return set(schema["properties"]["action"]["discriminator"]["mapping"])


async def test_send_message_decision_calls_the_tool_with_the_callers_agent_id() -> None:
    space = MessagingSpace()
    llm = ScriptedModel([decision("send_message", {"to_agent_id": 2, "content": "hi"})])
    router = ReActRouter([space], llm)

    reply = await router.ask(EnvRequest("ask", 1, "tell agent 2 hi"))

    assert reply.status == "success"
    assert reply.calls == (
        ToolCall("send_message", {"to_agent_id": 2, "content": "hi", "agent_id": 1}, "message to agent 2 queued for delivery", True),
    )
    assert reply.answer == "send_message: message to agent 2 queued for delivery"
    assert len(llm.requests) == 1
    await router.step(900, T1)
    assert await router.observe(2) == "Inbox (1 messages, latest 1):\n- from agent 1: hi"


async def test_llm_cannot_choose_the_sender_agent_id() -> None:
    llm = ScriptedModel([decision("send_message", {"agent_id": 9, "to_agent_id": 2, "content": "spoof"})] * 3)
    space = MessagingSpace()
    router = ReActRouter([space], llm)

    reply = await router.ask(EnvRequest("ask", 1, "pretend to be agent 9"))

    schema = llm.requests[0]["response_format"]["json_schema"]["schema"]
    assert "agent_id" not in schema["$defs"]["send_message_arguments"]["properties"]
    assert reply.status == "error"
    assert space.updates.all() == []


async def test_final_answer_returns_its_answer_and_status() -> None:
    llm = ScriptedModel([decision("final_answer", {"answer": "there is no weather here", "status": "fail"})])
    router = ReActRouter([MessagingSpace()], llm)

    reply = await router.ask(EnvRequest("ask", 1, "what is the weather?"))

    assert (reply.status, reply.answer) == ("fail", "there is no weather here")
    assert reply.calls == ()


async def test_tool_result_is_fed_into_the_next_turn_until_done() -> None:
    llm = ScriptedModel([
        decision("message_statistics", {}, done=False),
        decision("final_answer", {"answer": "nothing was sent yet", "status": "success"}),
    ])
    router = ReActRouter([MessagingSpace()], llm)

    reply = await router.ask(EnvRequest("ask", 1, "how busy is it?"))

    assert (reply.status, reply.answer) == ("success", "nothing was sent yet")
    second_prompt = llm.requests[1]["messages"][-1]["content"]
    assert "Result of message_statistics: 0 direct messages and 0 group posts delivered; 0 groups" in second_prompt


async def test_invalid_tool_name_is_retried_with_the_valid_tools_listed() -> None:
    space = MessagingSpace()
    llm = ScriptedModel([
        decision("send_mesage", {"to_agent_id": 2, "content": "hi"}),
        decision("send_message", {"to_agent_id": 2, "content": "hi"}),
    ])
    router = ReActRouter([space], llm)

    reply = await router.ask(EnvRequest("ask", 1, "tell agent 2 hi"))

    assert reply.status == "success"
    assert len(llm.requests) == 2
    retry = llm.requests[1]["messages"]
    assert retry[-2]["role"] == "assistant" and "send_mesage" in retry[-2]["content"]
    feedback = retry[-1]["content"]
    assert feedback.startswith("Your previous answer was not valid.")
    assert ("Valid tools: send_message, post_to_group, join_group, read_inbox, list_groups, "
            "message_statistics, final_answer") in feedback
    assert len(space.updates) == 1


async def test_readonly_ask_offers_no_mutating_tool_and_cannot_mutate() -> None:
    space = MessagingSpace()
    llm = ScriptedModel([decision("send_message", {"to_agent_id": 2, "content": "hi"})] * 3)
    router = ReActRouter([space], llm)

    reply = await router.ask(EnvRequest("ask", 1, "tell agent 2 hi", readonly=True))

    assert offered_tools(llm.requests[0]) == {"read_inbox", "list_groups", "message_statistics", "final_answer"}
    assert "send_message" not in llm.requests[0]["messages"][0]["content"]
    assert "READ-ONLY" in llm.requests[0]["messages"][0]["content"]
    assert len(llm.requests) == 3  # all retries used, none accepted
    assert "Valid tools: read_inbox, list_groups, message_statistics, final_answer" in llm.requests[2]["messages"][-1]["content"]
    assert reply.status == "error"
    assert reply.answer.startswith("the environment could not interpret the request")
    assert reply.calls == ()
    assert space.updates.all() == []
    assert space.get_tool_call_history() == []


async def test_mutating_ask_offers_every_tool() -> None:
    llm = ScriptedModel([decision("final_answer", {"answer": "-", "status": "success"})])
    router = ReActRouter([MessagingSpace()], llm)
    await router.ask(EnvRequest("ask", 1, "anything"))
    assert offered_tools(llm.requests[0]) == {*MessagingSpace.tools(), "final_answer"} - {"send_system_message"}  # experimenter-only


async def test_failing_tool_call_sets_status_fail_and_reports_the_error() -> None:
    space = MessagingSpace()
    space.bind_agents([1, 2])
    llm = ScriptedModel([decision("send_message", {"to_agent_id": 5, "content": "hi"})])
    router = ReActRouter([space], llm)

    reply = await router.ask(EnvRequest("ask", 1, "tell agent 5 hi"))

    assert reply.status == "fail"
    assert reply.calls[0].ok is False
    assert "there is no agent 5" in reply.answer


async def test_max_steps_without_done_reports_in_progress() -> None:
    llm = ScriptedModel([decision("read_inbox", {}, done=False)] * 2)
    router = ReActRouter([MessagingSpace()], llm, max_steps=2)

    reply = await router.ask(EnvRequest("ask", 1, "keep reading"))

    assert reply.status == "in_progress"
    assert [r.tool for r in reply.calls] == ["read_inbox", "read_inbox"]


async def test_observe_runs_observe_tools_without_any_llm_call() -> None:
    space = MessagingSpace()
    llm = ScriptedModel([])
    router = ReActRouter([space], llm)
    await router.call_tool("send_message", {"agent_id": 1, "to_agent_id": 2, "content": "hi"})
    await router.step(900, T1)

    assert await router.observe(2) == "Inbox (1 messages, latest 1):\n- from agent 1: hi"
    assert await router.observe(3) == "Your inbox is empty."
    assert llm.requests == []


async def test_concurrent_tool_calls_through_the_router_lose_no_update() -> None:
    space = MessagingSpace()
    router = ReActRouter([space], ScriptedModel([]))

    await asyncio.gather(*(
        router.call_tool("send_message", {"agent_id": i, "to_agent_id": 0, "content": f"m{i}"}) for i in range(200)
    ))

    assert len(space.updates) == 200


class SlowCounter(EnvBase):
    """A counter whose increment yields between read and write (races without the router's lock)."""

    def __init__(self) -> None:
        super().__init__()
        self.value = 0

    @tool()
    async def increment(self, agent_id: int) -> int:
        """Add one."""
        seen = self.value
        await asyncio.sleep(0)
        self.value = seen + 1
        return self.value


async def test_router_lock_serialises_async_tools_of_unsafe_modules() -> None:
    counter = SlowCounter()
    router = ReActRouter([counter], ScriptedModel([]))

    results = await asyncio.gather(*(router.call_tool("increment", {"agent_id": i}) for i in range(200)))

    assert counter.value == 200
    assert sorted(results) == list(range(1, 201))


async def test_router_prefixes_a_tool_name_shared_by_two_modules() -> None:
    first, second = MessagingSpace(), MessagingSpace()
    router = ReActRouter([first, second], ScriptedModel([]))

    await router.call_tool("MessagingSpace_send_message", {"agent_id": 1, "to_agent_id": 2, "content": "hi"})

    assert "send_message" in router.tools() and "MessagingSpace_send_message" in router.tools()
    assert first.updates.all() == []
    assert len(second.updates) == 1
