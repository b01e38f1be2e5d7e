"""Two-tier routers: tier 1 picks a module from an enum, tier 2 routes with only that module's tools."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.env.base import EnvBase
from engine.env.modules.messaging import MessagingSpace
from engine.env.requests import EnvReply, EnvRequest, ToolCall
from engine.env.router_base import RouterBase
from engine.env.routers.two_tier import TwoTierPlanExecuteRouter, TwoTierReActRouter, TwoTierRouter
from engine.env.tool import tool
from engine.llm.backends.scripted import ScriptedModel
from engine.llm.backends.sim_backend import SimChatModel


class Bank(EnvBase):
    """A bank: agents deposit money and check their account balance."""

    def __init__(self) -> None:
        super().__init__()
        self.balances: dict[int, int] = {}

    @tool()
    def deposit(self, agent_id: int, amount: int) -> str:
        """Deposit an amount of money into agent_id's bank account."""
        if amount <= 0:
            raise ValueError("amount must be positive")
        self.balances[agent_id] = self.balances.get(agent_id, 0) + amount
        return f"balance {self.balances[agent_id]}"

    @tool(readonly=True)
    def balance(self, agent_id: int) -> str:
        """Show agent_id's bank account balance."""
        return f"balance {self.balances.get(agent_id, 0)}"


class Alarm(EnvBase):
    """An alarm bell with nothing to read."""

    def __init__(self) -> None:
        super().__init__()
        self.rung = 0

    @tool()
    def ring(self) -> str:
        """Ring the alarm bell."""
        self.rung += 1
        return "ring!"


def choose(module: str) -> dict[str, Any]:
    return {"thought": "ok", "module": module}


def decision(tool_name: str, arguments: dict[str, Any], *, done: bool = True) -> dict[str, Any]:
    return {"thought": "ok", "action": {"tool": tool_name, "arguments": arguments}, "done": done}


def plan(*steps: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return {"thought": "ok", "steps": [{"tool": t, "arguments": a, "purpose": "needed"} for t, a in steps]}


def module_enum(request: dict[str, Any]) -> list[str]:
    return request["response_format"]["json_schema"]["schema"]["properties"]["module"]["enum"]


def offered_tools(request: dict[str, Any]) -> set[str]:
    """Tool names a tier-2 request allows (ReAct action or plan step)."""
    props = request["response_format"]["json_schema"]["schema"]["properties"]
    union = props["action"] if "action" in props else props["steps"]["items"]
    return set(union["discriminator"]["mapping"])


def assert_valid_calls(router: RouterBase, reply: EnvReply, *, readonly: bool) -> None:
    """Every call names an offered tool of the chosen module, with schema-valid arguments."""
    offered = router.tools(readonly=readonly)
    for row in reply.calls:
        assert row.tool in offered and offered[row.tool].module == reply.module
        offered[row.tool].args_model.model_validate(row.arguments)
        assert row.arguments.get("agent_id", 1) == 1
        assert "bad arguments" not in row.result and "unknown tool" not in row.result
    assert len(router.get_tool_call_history()) == len(reply.calls)


async def test_react_tier_one_offers_the_modules_then_tier_two_only_that_modules_tools() -> None:
    space, bank = MessagingSpace(), Bank()
    llm = ScriptedModel([choose("Bank"), decision("deposit", {"amount": 7})])
    router = TwoTierReActRouter([space, bank], llm)

    reply = await router.ask(EnvRequest("ask", 1, "put 7 in the bank"))

    assert module_enum(llm.requests[0]) == ["MessagingSpace", "Bank"]
    tier_one = llm.requests[0]["messages"][0]["content"]
    assert "- Bank: A bank: agents deposit money and check their account balance. (tools: deposit, balance)" in tier_one
    assert offered_tools(llm.requests[1]) == {"deposit", "balance", "final_answer"}
    assert "send_message" not in llm.requests[1]["messages"][0]["content"]
    assert (reply.status, reply.module, reply.answer) == ("success", "Bank", "deposit: balance 7")
    assert reply.calls == (ToolCall("deposit", {"amount": 7, "agent_id": 1}, "balance 7", True),)
    assert bank.balances == {1: 7}


async def test_plan_tier_two_plans_over_the_chosen_module_only() -> None:
    space = MessagingSpace()
    llm = ScriptedModel([choose("MessagingSpace"), plan(("send_message", {"to_agent_id": 2, "content": "hi"}), ("read_inbox", {}))])
    router = TwoTierPlanExecuteRouter([space, Bank()], llm)

    reply = await router.ask(EnvRequest("ask", 1, "tell agent 2 hi"))

    assert offered_tools(llm.requests[1]) == {*MessagingSpace.tools(), "final_answer"} - {"send_system_message"}  # experimenter-only
    assert (reply.status, reply.module) == ("success", "MessagingSpace")
    assert [r.tool for r in reply.calls] == ["send_message", "read_inbox"]
    assert len(space.updates) == 1


async def test_plan_tier_two_replans_after_a_failing_step() -> None:
    bank = Bank()
    llm = ScriptedModel([choose("Bank"), plan(("deposit", {"amount": 0})), plan(("deposit", {"amount": 3}))])
    router = TwoTierPlanExecuteRouter([MessagingSpace(), bank], llm)

    reply = await router.ask(EnvRequest("ask", 1, "deposit 3"))

    assert [(r.tool, r.ok) for r in reply.calls] == [("deposit", False), ("deposit", True)]
    assert "Step deposit failed" in llm.requests[2]["messages"][-1]["content"]
    assert reply.status == "success" and bank.balances == {1: 3}


@pytest.mark.parametrize("router_type", [TwoTierReActRouter, TwoTierPlanExecuteRouter])
async def test_unknown_module_is_retried_with_the_valid_modules_then_status_error(router_type: type[TwoTierRouter]) -> None:
    bank = Bank()
    llm = ScriptedModel([choose("Weather")] * 3)
    router = router_type([MessagingSpace(), bank], llm)

    reply = await router.ask(EnvRequest("ask", 1, "is it raining?"))

    assert len(llm.requests) == 3
    assert "Valid modules: MessagingSpace, Bank" in llm.requests[1]["messages"][-1]["content"]
    assert (reply.status, reply.calls) == ("error", ())
    assert reply.module is None
    assert reply.answer.startswith("the environment could not interpret the request")


async def test_tool_of_another_module_is_rejected_in_tier_two() -> None:
    space = MessagingSpace()
    llm = ScriptedModel([choose("Bank"), *[decision("send_message", {"to_agent_id": 2, "content": "hi"})] * 3])
    router = TwoTierReActRouter([space, Bank()], llm)

    reply = await router.ask(EnvRequest("ask", 1, "tell agent 2 hi"))

    assert "Valid tools: deposit, balance, final_answer" in llm.requests[2]["messages"][-1]["content"]
    assert reply.status == "error" and space.updates.all() == []


@pytest.mark.parametrize("router_type", [TwoTierReActRouter, TwoTierPlanExecuteRouter])
async def test_readonly_ask_offers_no_mutating_tool_and_drops_modules_without_readonly_tools(router_type: type[TwoTierRouter]) -> None:
    bank, alarm = Bank(), Alarm()
    tier_two = decision("deposit", {"amount": 5}) if router_type is TwoTierReActRouter else plan(("deposit", {"amount": 5}))
    llm = ScriptedModel([choose("Bank"), *[tier_two] * 3])
    router = router_type([MessagingSpace(), bank, alarm], llm)

    reply = await router.ask(EnvRequest("ask", 1, "deposit 5", readonly=True))

    assert module_enum(llm.requests[0]) == ["MessagingSpace", "Bank"]
    assert "READ-ONLY" in llm.requests[0]["messages"][0]["content"]
    assert offered_tools(llm.requests[1]) == {"balance", "final_answer"}
    assert reply.status == "error" and reply.calls == ()
    assert bank.balances == {} and alarm.rung == 0


async def test_a_single_offered_module_is_chosen_without_an_llm_call() -> None:
    llm = ScriptedModel([decision("balance", {})])
    router = TwoTierReActRouter([Bank(), Alarm()], llm)

    reply = await router.ask(EnvRequest("ask", 1, "check my balance", readonly=True))

    assert len(llm.requests) == 1 and "module" not in llm.requests[0]["response_format"]["json_schema"]["schema"]["properties"]
    assert (reply.status, reply.module) == ("success", "Bank")


async def test_no_offered_tool_fails_without_an_llm_call() -> None:
    llm = ScriptedModel([])
    router = TwoTierReActRouter([Alarm()], llm)

    reply = await router.ask(EnvRequest("ask", 1, "what time is it?", readonly=True))

    assert (reply.status, reply.calls) == ("fail", ())
    assert "no environment tool" in reply.answer and llm.requests == []


async def test_repeated_module_types_get_distinct_keys() -> None:
    first, second = MessagingSpace(), MessagingSpace()
    llm = ScriptedModel([choose("MessagingSpace_1"), decision("MessagingSpace_send_message", {"to_agent_id": 2, "content": "hi"})])
    router = TwoTierReActRouter([first, second], llm)

    reply = await router.ask(EnvRequest("ask", 1, "tell agent 2 hi via the second space"))

    assert module_enum(llm.requests[0]) == ["MessagingSpace", "MessagingSpace_1"]
    assert reply.status == "success"
    assert first.updates.all() == [] and len(second.updates) == 1


@pytest.mark.parametrize("router_type", [TwoTierReActRouter, TwoTierPlanExecuteRouter])
@pytest.mark.parametrize("readonly", [False, True])
async def test_simulated_llm_makes_only_valid_calls_and_reaches_deposit(router_type: type[TwoTierRouter], readonly: bool) -> None:
    reached: set[str] = set()
    for seed in range(12):
        space, bank = MessagingSpace(), Bank()
        before = (copy.deepcopy(space.dump_state()), dict(bank.balances))
        router = router_type([space, bank], SimChatModel("default", seed=seed))

        reply = await router.ask(EnvRequest("ask", 1, "deposit 5 coins in my bank account", readonly=readonly))

        assert reply.status in {"success", "in_progress", "fail", "error", "unknown"} and isinstance(reply.answer, str)
        assert_valid_calls(router, reply, readonly=readonly)
        reached |= {r.tool for r in reply.calls if r.ok}
        if readonly:
            assert (space.dump_state(), bank.balances) == before
    if readonly:
        assert reached and reached <= {"read_inbox", "list_groups", "message_statistics", "balance"}
    else:
        assert "deposit" in reached
