"""EnvHandle is met, method for method, by the in-process router, the actor proxy and the shipped fake."""

from __future__ import annotations

import inspect
from typing import get_args

import pytest

from engine.env.handle import EnvHandle
from engine.env.modules.messaging import MessagingSpace
from engine.env.proxy import EnvRouterProxy
from engine.env.requests import ENV_STATUSES, EnvReply, EnvRequest, EnvStatus, ToolCall
from engine.env.router_base import STATUS_DESCRIPTIONS, RouterBase
from engine.env.routers import ReActRouter
from engine.env.scripted import ScriptedEnv
from engine.errors import ToolCallError
from engine.llm.backends.scripted import ScriptedModel

HANDLE_METHODS = [name for name, value in vars(EnvHandle).items() if inspect.isfunction(value) and not name.startswith("_")]


@pytest.mark.parametrize("implementation", [RouterBase, EnvRouterProxy, ScriptedEnv])
@pytest.mark.parametrize("method", HANDLE_METHODS)
def test_each_handle_implements_every_method_with_the_protocols_signature(implementation: type, method: str) -> None:
    expected, actual = getattr(EnvHandle, method), getattr(implementation, method)
    assert inspect.iscoroutinefunction(actual) == inspect.iscoroutinefunction(expected)
    assert [(p.name, p.kind) for p in inspect.signature(actual).parameters.values()] == \
        [(p.name, p.kind) for p in inspect.signature(expected).parameters.values()]


def test_the_handles_in_use_are_env_handles() -> None:
    handles = [ReActRouter([MessagingSpace()], ScriptedModel([])), EnvRouterProxy("tcp://127.0.0.1:1", "k"), ScriptedEnv()]
    assert all(isinstance(handle, EnvHandle) for handle in handles)
    assert set(HANDLE_METHODS) == {"ask", "observe", "call_tool", "discard_pending", "get_world_description"}


async def test_a_router_answers_an_ask_with_a_typed_reply_naming_its_calls() -> None:
    decision = {"thought": "t", "done": True, "action": {"tool": "send_message", "arguments": {"to_agent_id": 2, "content": "hi"}}}
    router = ReActRouter([MessagingSpace()], ScriptedModel([decision]))

    reply = await router.ask(EnvRequest("ask", 1, "tell agent 2 hi"))

    assert reply == EnvReply(
        "send_message: message to agent 2 queued for delivery", "success",
        (ToolCall("send_message", {"to_agent_id": 2, "content": "hi", "agent_id": 1}, "message to agent 2 queued for delivery", True),),
    )
    assert reply.tools == ("send_message",)


def test_statuses_are_defined_once_and_all_described() -> None:
    assert ENV_STATUSES == get_args(EnvStatus) == tuple(STATUS_DESCRIPTIONS)


# ---- the shipped fake ----------------------------------------------------------------------------
async def test_scripted_env_answers_in_order_and_records_every_request() -> None:
    env = ScriptedEnv(["done", EnvReply("no such place", "fail")], observation="You are home.", world="A test town.")
    first = EnvRequest("ask", 1, "go to {place}", template_mode=True, variables={"place": "park"})

    assert await env.ask(first) == EnvReply("done", "success")
    assert (await env.ask(EnvRequest("ask", 2, "fly"))).status == "fail"
    assert await env.observe(3) == "You are home."
    assert await env.discard_pending(3) == 0
    assert env.get_world_description() == "A test town."
    assert env.requests == [first, EnvRequest("ask", 2, "fly"), EnvRequest("observe", 3, readonly=True), EnvRequest("discard", 3)]
    with pytest.raises(AssertionError, match="ran out of replies"):
        await env.ask(EnvRequest("ask", 1, "again"))


async def test_scripted_env_runs_only_its_scripted_tools() -> None:
    env = ScriptedEnv(tools={"balance": lambda arguments: {"agent": arguments["agent_id"], "coins": 5}})

    assert await env.call_tool("balance", {"agent_id": 4}, readonly=True) == {"agent": 4, "coins": 5}
    with pytest.raises(ToolCallError, match="unknown tool 'deposit'"):
        await env.call_tool("deposit", {"agent_id": 4})
    assert env.requests[0] == EnvRequest("call_tool", 4, "balance", True, arguments={"agent_id": 4})


async def test_scripted_env_refuses_a_request_that_is_not_an_ask() -> None:
    with pytest.raises(ValueError, match="not 'observe'"):
        await ScriptedEnv(["x"]).ask(EnvRequest("observe", 1))
