"""PlanExecuteRouter: one structured plan, executed in order, one bounded replan after a failing step."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from engine.env.base import EnvBase
from engine.env.modules.messaging import MessagingSpace
from engine.env.requests import EnvReply, EnvRequest, ToolCall
from engine.env.router_base import RouterBase
from engine.env.routers.plan_execute import PlanExecuteRouter
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


def step(tool_name: str, arguments: dict[str, Any], purpose: str = "needed") -> dict[str, Any]:
    return {"tool": tool_name, "arguments": arguments, "purpose": purpose}


def plan(*steps: dict[str, Any], thought: str = "ok") -> dict[str, Any]:
    return {"thought": thought, "steps": list(steps)}


def offered_tools(request: dict[str, Any]) -> set[str]:
    """The tool names a request's plan schema allows in a step."""
    items = request["response_format"]["json_schema"]["schema"]["properties"]["steps"]["items"]
    return set(items["discriminator"]["mapping"])


def assert_valid_calls(router: RouterBase, reply: EnvReply, *, readonly: bool) -> None:
    """Every call names an offered tool with schema-valid arguments, and the modules saw exactly those calls."""
    offered = router.tools(readonly=readonly)
    for row in reply.calls:
        assert row.tool in offered
        offered[row.tool].args_model.model_validate(row.arguments)
        assert row.arguments.get("agent_id", 1) == 1
        assert "bad arguments" not in row.result and "unknown tool" not in row.result
    history = router.get_tool_call_history()
    assert len(history) == len(reply.calls)
    assert all(record["function_name"] in {info.name for info in offered.values()} for record in history)


async def test_plan_steps_run_in_order_with_the_callers_agent_id() -> None:
    space, bank = MessagingSpace(), Bank()
    llm = ScriptedModel([plan(step("deposit", {"amount": 5}), step("send_message", {"to_agent_id": 2, "content": "paid"}))])
    router = PlanExecuteRouter([space, bank], llm)

    reply = await router.ask(EnvRequest("ask", 1, "deposit 5 and tell agent 2"))

    assert reply.status == "success"
    assert reply.calls == (
        ToolCall("deposit", {"amount": 5, "agent_id": 1}, "balance 5", True),
        ToolCall("send_message", {"to_agent_id": 2, "content": "paid", "agent_id": 1}, "message to agent 2 queued for delivery", True),
    )
    assert reply.answer == "deposit: balance 5\nsend_message: message to agent 2 queued for delivery"
    assert len(llm.requests) == 1
    assert bank.balances == {1: 5}


async def test_plan_schema_offers_every_tool_caps_the_length_and_hides_agent_id() -> None:
    llm = ScriptedModel([plan(step("final_answer", {"answer": "-", "status": "success"}))])
    router = PlanExecuteRouter([MessagingSpace(), Bank()], llm, max_steps=4)

    await router.ask(EnvRequest("ask", 1, "anything"))

    schema = llm.requests[0]["response_format"]["json_schema"]["schema"]
    assert offered_tools(llm.requests[0]) == {*MessagingSpace.tools(), *Bank.tools(), "final_answer"} - {"send_system_message"}  # experimenter-only
    assert (schema["properties"]["steps"]["minItems"], schema["properties"]["steps"]["maxItems"]) == (1, 4)
    assert "agent_id" not in schema["$defs"]["deposit_arguments"]["properties"]
    assert set(schema["$defs"]["PlanStep_deposit"]["properties"]) == {"tool", "arguments", "purpose"}


async def test_plan_longer_than_max_steps_is_rejected_and_retried() -> None:
    too_long = plan(*[step("balance", {})] * 3)
    llm = ScriptedModel([too_long, plan(step("balance", {}))])
    router = PlanExecuteRouter([Bank()], llm, max_steps=2)

    reply = await router.ask(EnvRequest("ask", 1, "check my balance"))

    assert reply.status == "success"
    assert len(reply.calls) == 1
    assert "steps" in llm.requests[1]["messages"][-1]["content"]


async def test_failing_step_triggers_one_replan_that_sees_the_error() -> None:
    bank = Bank()
    llm = ScriptedModel([
        plan(step("deposit", {"amount": -5}), step("balance", {})),
        plan(step("deposit", {"amount": 5}), step("balance", {})),
    ])
    router = PlanExecuteRouter([MessagingSpace(), bank], llm)

    reply = await router.ask(EnvRequest("ask", 1, "deposit 5"))

    assert reply.status == "success"
    assert [(r.tool, r.ok) for r in reply.calls] == [("deposit", False), ("deposit", True), ("balance", True)]
    assert len(llm.requests) == 2
    replan = llm.requests[1]["messages"]
    assert replan[-2]["role"] == "assistant" and '"amount":-5' in replan[-2]["content"]
    assert "Step deposit failed: error: Bank.deposit failed: amount must be positive" in replan[-1]["content"]
    assert bank.balances == {1: 5}
    assert reply.answer.endswith("balance: balance 5")


async def test_replans_are_bounded_and_a_step_failing_after_them_ends_with_fail() -> None:
    llm = ScriptedModel([plan(step("deposit", {"amount": -1})), plan(step("deposit", {"amount": -2}), step("balance", {}))])
    router = PlanExecuteRouter([Bank()], llm, max_replans=1)

    reply = await router.ask(EnvRequest("ask", 1, "deposit something"))

    assert reply.status == "fail"
    assert [(r.tool, r.ok) for r in reply.calls] == [("deposit", False), ("deposit", False)]
    assert len(llm.requests) == 2
    assert "amount must be positive" in reply.answer


async def test_no_replan_when_max_replans_is_zero() -> None:
    llm = ScriptedModel([plan(step("deposit", {"amount": -1}), step("balance", {}))])
    router = PlanExecuteRouter([Bank()], llm, max_replans=0)

    reply = await router.ask(EnvRequest("ask", 1, "deposit something"))

    assert reply.status == "fail"
    assert [r.tool for r in reply.calls] == ["deposit"]
    assert len(llm.requests) == 1


async def test_tool_calls_across_replans_stop_at_max_steps_with_in_progress() -> None:
    llm = ScriptedModel([plan(step("deposit", {"amount": -1})), plan(step("balance", {}), step("balance", {}))])
    router = PlanExecuteRouter([Bank()], llm, max_steps=2)

    reply = await router.ask(EnvRequest("ask", 1, "deposit then check twice"))

    assert reply.status == "in_progress"
    assert [r.tool for r in reply.calls] == ["deposit", "balance"]


async def test_a_final_answer_only_plan_returns_its_answer_and_status() -> None:
    llm = ScriptedModel([plan(step("final_answer", {"answer": "there is no weather here", "status": "fail"}))])
    router = PlanExecuteRouter([MessagingSpace()], llm)

    reply = await router.ask(EnvRequest("ask", 1, "what is the weather?"))

    assert (reply.status, reply.answer, reply.calls) == ("fail", "there is no weather here", ())


async def test_a_final_answer_written_before_the_results_is_not_reported() -> None:
    llm = ScriptedModel([plan(step("balance", {}), step("final_answer", {"answer": "you are rich", "status": "success"}))])
    router = PlanExecuteRouter([Bank()], llm)

    reply = await router.ask(EnvRequest("ask", 1, "am I rich?"))

    assert (reply.status, reply.answer) == ("success", "balance: balance 0")


async def test_invalid_plans_are_retried_with_feedback_then_status_error() -> None:
    bank = Bank()
    llm = ScriptedModel([plan(step("withdraw", {"amount": 5}))] * 3)
    router = PlanExecuteRouter([MessagingSpace(), bank], llm)

    reply = await router.ask(EnvRequest("ask", 1, "withdraw 5"))

    assert len(llm.requests) == 3
    feedback = llm.requests[1]["messages"][-1]["content"]
    assert feedback.startswith("Your previous answer was not valid.")
    assert "Valid tools: send_message, post_to_group, join_group, read_inbox, list_groups, message_statistics, deposit, balance, final_answer" in feedback
    assert reply.status == "error" and reply.calls == ()
    assert reply.answer.startswith("the environment could not interpret the request")
    assert bank.balances == {} and router.get_tool_call_history() == []


async def test_an_unreadable_replan_ends_with_error_and_keeps_the_real_results() -> None:
    llm = ScriptedModel([plan(step("deposit", {"amount": -1})), "not json", "{}", "[]"])
    router = PlanExecuteRouter([Bank()], llm)

    reply = await router.ask(EnvRequest("ask", 1, "deposit"))

    assert reply.status == "error"
    assert [(r.tool, r.ok) for r in reply.calls] == [("deposit", False)]
    assert reply.answer.startswith("the environment could not interpret the request")


async def test_readonly_plan_offers_no_mutating_tool_and_cannot_mutate() -> None:
    space, bank = MessagingSpace(), Bank()
    llm = ScriptedModel([plan(step("deposit", {"amount": 5}))] * 3)
    router = PlanExecuteRouter([space, bank], llm)

    reply = await router.ask(EnvRequest("ask", 1, "deposit 5", readonly=True))

    assert offered_tools(llm.requests[0]) == {"read_inbox", "list_groups", "message_statistics", "balance", "final_answer"}
    assert "READ-ONLY" in llm.requests[0]["messages"][0]["content"]
    assert reply.status == "error" and reply.calls == ()
    assert bank.balances == {} and space.updates.all() == []


async def test_template_mode_fills_variables_from_the_request() -> None:
    llm = ScriptedModel([plan(step("balance", {}))])
    router = PlanExecuteRouter([Bank()], llm)

    await router.ask(EnvRequest("ask", 1, "show my {what}", template_mode=True, variables={"what": "balance"}))

    assert "show my balance" in llm.requests[0]["messages"][-1]["content"]


@pytest.mark.parametrize("readonly", [False, True])
async def test_simulated_llm_makes_only_valid_calls_and_reaches_deposit(readonly: bool) -> None:
    reached: set[str] = set()
    for seed in range(12):
        space, bank = MessagingSpace(), Bank()
        before = (copy.deepcopy(space.dump_state()), dict(bank.balances))
        router = PlanExecuteRouter([space, bank], SimChatModel("default", seed=seed))

        reply = await router.ask(EnvRequest("ask", 1, "deposit 5 coins in my bank account", readonly=readonly))

        assert reply.status in {"success", "in_progress", "fail", "error", "unknown"} and isinstance(reply.answer, str)
        assert_valid_calls(router, reply, readonly=readonly)
        reached |= {r.tool for r in reply.calls if r.ok}
        if readonly:
            assert (space.dump_state(), bank.balances) == before
    if not readonly:
        assert "deposit" in reached
    else:
        assert reached and reached <= {"read_inbox", "list_groups", "message_statistics", "balance"}
