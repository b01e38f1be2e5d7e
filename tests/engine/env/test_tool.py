"""The @tool contract is checked when a module class is defined; call_tool validates and records."""

from __future__ import annotations

import pytest

from engine.env.base import EnvBase
from engine.env.modules.messaging import MessagingSpace
from engine.env.tool import tool
from engine.errors import ToolCallError, ToolDefinitionError


class Tally(EnvBase):
    """A counter per agent (test module)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: dict[int, int] = {}

    @tool()
    async def add(self, agent_id: int, amount: int = 1) -> int:
        """Add amount to agent_id's counter.

        A second line that the description leaves out.
        """
        self.counts[agent_id] = self.counts.get(agent_id, 0) + amount
        return self.counts[agent_id]

    @tool(readonly=True, kind="observe")
    def my_count(self, agent_id: int) -> str:
        """Show agent_id's counter."""
        return f"count={self.counts.get(agent_id, 0)}"

    @tool(readonly=True, kind="statistics")
    def total(self) -> int:
        """Sum of all counters."""
        return sum(self.counts.values())

    @tool()
    def fail(self, agent_id: int) -> None:
        """Always refuses."""
        raise ValueError(f"agent {agent_id} may not do that")

    def helper(self) -> None:
        """Not a tool: no decorator."""


def test_observe_tool_with_other_params_is_rejected_at_class_definition() -> None:
    with pytest.raises(ToolDefinitionError, match=r"Bad\.look: an observe tool takes exactly one argument, agent_id"):

        class Bad(EnvBase):
            @tool(readonly=True, kind="observe")
            def look(self, agent_id: int, radius: int) -> str:
                return ""


def test_observe_tool_with_wrongly_named_param_is_rejected() -> None:
    with pytest.raises(ToolDefinitionError, match="exactly one argument, agent_id"):

        class Bad(EnvBase):
            @tool(readonly=True, kind="observe")
            def look(self, person: int) -> str:
                return ""


def test_statistics_tool_with_params_is_rejected() -> None:
    with pytest.raises(ToolDefinitionError, match=r"Bad\.stats: a statistics tool takes no arguments"):

        class Bad(EnvBase):
            @tool(readonly=True, kind="statistics")
            def stats(self, agent_id: int) -> int:
                return 0


@pytest.mark.parametrize("kind", ["observe", "statistics"])
def test_observe_and_statistics_tools_must_be_readonly(kind: str) -> None:
    with pytest.raises(ToolDefinitionError, match=rf"Bad\.look: kind='{kind}' tools must be readonly=True"):

        class Bad(EnvBase):
            @tool(readonly=False, kind=kind)  # type: ignore[arg-type]
            def look(self, agent_id: int) -> str:
                return ""


def test_parameter_without_annotation_is_rejected() -> None:
    with pytest.raises(ToolDefinitionError, match=r"Bad\.act: parameter 'target' needs a type annotation"):

        class Bad(EnvBase):
            @tool()
            def act(self, agent_id: int, target) -> str:  # type: ignore[no-untyped-def]
                return ""


def test_var_keyword_parameters_are_rejected() -> None:
    with pytest.raises(ToolDefinitionError, match=r"\*args/\*\*kwargs"):

        class Bad(EnvBase):
            @tool()
            def act(self, agent_id: int, **extra: int) -> str:
                return ""


def test_unknown_kind_is_rejected_by_the_decorator() -> None:
    with pytest.raises(ToolDefinitionError, match="kind must be 'observe', 'statistics' or None"):
        tool(kind="report")  # type: ignore[arg-type]


def test_tools_lists_decorated_methods_with_readonly_and_kind() -> None:
    tools = Tally.tools()
    assert sorted(tools) == ["add", "fail", "my_count", "total"]
    assert {n: (t.readonly, t.kind) for n, t in tools.items()} == {
        "add": (False, None),
        "fail": (False, None),
        "my_count": (True, "observe"),
        "total": (True, "statistics"),
    }
    add = tools["add"]
    assert add.module == "Tally"
    assert add.is_async and not tools["total"].is_async
    assert add.description == "Add amount to agent_id's counter."
    assert add.signature_line() == "add(agent_id: integer, amount: integer)"


def test_messaging_space_tools_describe_their_contract() -> None:
    tools = MessagingSpace.tools()
    assert {n: (t.readonly, t.kind) for n, t in tools.items()} == {
        "send_message": (False, None),
        "post_to_group": (False, None),
        "join_group": (False, None),
        "send_system_message": (False, None),
        "read_inbox": (True, "observe"),
        "list_groups": (True, None),
        "message_statistics": (True, "statistics"),
    }
    assert tools["send_system_message"].experimenter and not tools["send_message"].experimenter
    assert tools["send_message"].signature_line() == "send_message(agent_id: integer, to_agent_id: integer, content: string)"


def test_tools_returns_a_copy_callers_cannot_corrupt() -> None:
    Tally.tools().clear()
    assert "add" in Tally.tools()


async def test_call_tool_runs_async_tools_and_applies_defaults() -> None:
    tally = Tally()
    assert await tally.call_tool("add", {"agent_id": 1}) == 1
    assert await tally.call_tool("add", {"agent_id": 1, "amount": 4}) == 5
    assert await tally.call_tool("total", {}) == 5


@pytest.mark.parametrize(
    "arguments",
    [
        {"agent_id": "one"},  # wrong type
        {"amount": 2},  # missing required
        {"agent_id": 1, "colour": "red"},  # extra argument
    ],
)
async def test_call_tool_refuses_bad_arguments_without_running(arguments: dict) -> None:
    tally = Tally()
    with pytest.raises(ToolCallError, match=r"bad arguments for Tally\.add"):
        await tally.call_tool("add", arguments)
    assert tally.counts == {}
    assert tally.get_tool_call_history() == []


async def test_call_tool_refuses_unknown_tool_and_undecorated_methods() -> None:
    tally = Tally()
    with pytest.raises(ToolCallError, match="Tally has no tool 'helper'"):
        await tally.call_tool("helper", {})


async def test_readonly_call_refuses_a_mutating_tool_but_allows_readonly_ones() -> None:
    tally = Tally()
    with pytest.raises(ToolCallError, match=r"Tally\.add changes state and this ask is readonly"):
        await tally.call_tool("add", {"agent_id": 1}, readonly=True)
    assert tally.counts == {}
    assert await tally.call_tool("my_count", {"agent_id": 1}, readonly=True) == "count=0"


async def test_call_tool_records_history_with_trace_id() -> None:
    tally = Tally()
    tally.set_trace_context("trace-abc")
    await tally.call_tool("add", {"agent_id": 7, "amount": 2})
    tally.set_trace_context(None)
    await tally.call_tool("total", {})

    first, second = tally.get_tool_call_history()
    assert first["function_name"] == "add"
    assert first["kwargs"] == {"agent_id": 7, "amount": 2}
    assert first["trace_id"] == "trace-abc"
    assert (first["result"], first["result_chars"]) == ("2", 1)
    assert first["exception_occurred"] is False
    assert second["function_name"] == "total" and second["trace_id"] is None
    assert first["timestamp"] <= second["timestamp"]

    tally.reset_tool_call_history()
    assert tally.get_tool_call_history() == []


async def test_failing_tool_becomes_tool_call_error_and_is_recorded() -> None:
    tally = Tally()
    tally.set_trace_context("t-1")
    with pytest.raises(ToolCallError, match=r"Tally\.fail failed: agent 3 may not do that"):
        await tally.call_tool("fail", {"agent_id": 3})
    (record,) = tally.get_tool_call_history()
    assert record["exception_occurred"] is True
    assert "may not do that" in record["exception_info"]
    assert record["trace_id"] == "t-1"
    assert "result" not in record


async def test_discarded_calls_leave_the_history_and_the_agents_later_calls_stay() -> None:
    tally = Tally()
    for agent_id in (1, 2, 1):
        await tally.call_tool("add", {"agent_id": agent_id})
    assert tally.discard_tool_calls(1) == 2
    assert tally.discard_tool_calls(1) == 0  # nothing left to undo
    await tally.call_tool("add", {"agent_id": 1, "amount": 5})  # the retried step
    assert [(r["agent_id"], r["kwargs"]["amount"]) for r in tally.get_tool_call_history()] == [(2, 1), (1, 5)]
    assert [r["agent_id"] for r in tally.drain_tool_calls()] == [2, 1]
    assert tally.get_tool_call_history() == [] and tally.discard_tool_calls(2) == 0
    await tally.call_tool("add", {"agent_id": 2})  # a new step: nothing of the last one's undoing holds
    assert [r["agent_id"] for r in tally.get_tool_call_history()] == [2]
