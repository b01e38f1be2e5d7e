"""The agent's ReAct loop driven by a ScriptedModel: finishing, asking the env, retries and failures."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from engine.agent.person import PersonAgent
from engine.agent.service_proxy import ServiceProxy
from engine.env.modules.messaging import MessagingSpace
from engine.env.routers.react import ReActRouter
from engine.llm.backends.scripted import ScriptedModel
from engine.llm.client import LLMClient
from engine.llm.meter import MeteredModel

T1 = datetime(2024, 1, 1, 8, 15)
T2 = datetime(2024, 1, 1, 8, 30)


def finish(summary: str, thought: str = "done") -> dict[str, Any]:
    return {"thought": thought, "action": {"tool": "finish", "arguments": {"summary": summary}}, "finish": True}


def ask_env(instruction: str, *, done: bool = False) -> dict[str, Any]:
    return {"thought": "ask", "action": {"tool": "ask_env", "arguments": {"instruction": instruction}}, "finish": done}


def router_says(tool: str, arguments: dict[str, Any], *, done: bool = True) -> dict[str, Any]:
    return {"thought": "route", "action": {"tool": tool, "arguments": arguments}, "done": done}


def offered_tools(request: dict[str, Any]) -> set[str]:
    schema = request["response_format"]["json_schema"]["schema"]
    return set(schema["properties"]["action"]["discriminator"]["mapping"])


class World:
    """One messaging space behind a ReActRouter whose LLM is scripted, plus agents on it."""

    def __init__(self, root: Path, router_replies: list[Any]) -> None:
        self.root = root
        self.space = MessagingSpace()
        self.router_llm = ScriptedModel(router_replies)
        self.router = ReActRouter([self.space], self.router_llm)
        self.services = ServiceProxy(env=self.router, llm={"default": LLMClient(model="sim/default:test")})

    async def agent(self, agent_id: int, replies: list[Any], **config: Any) -> tuple[PersonAgent, ScriptedModel]:
        path = self.root / f"agent_{agent_id:04d}"
        PersonAgent.create(path, agent_id=agent_id, profile={"name": f"P{agent_id}"}, config=config)
        agent = await PersonAgent.from_workspace(path, self.services)
        llm = ScriptedModel(replies)
        agent._dispatcher = MeteredModel(llm, agent.meter, caller=f"agent:{agent_id}")
        return agent, llm


@pytest.fixture
def world_factory(tmp_path: Path):
    def make(router_replies: list[Any] | None = None) -> World:
        return World(tmp_path, router_replies or [])

    return make


async def test_finish_on_the_first_turn_ends_the_step_with_its_summary(world_factory) -> None:
    world = world_factory()
    agent, llm = await world.agent(1, [finish("had a quiet morning")])

    outcome = await agent.step(900, T1)

    assert outcome.status == "finished"
    assert outcome.summary == "had a quiet morning"
    assert outcome.tools_called == ["finish"]
    assert outcome.turns == 1
    assert outcome.env_calls == 1  # the observation only
    assert world.router_llm.requests == []
    assert "Your inbox is empty." in llm.requests[0]["messages"][-1]["content"]  # the turn's request comes last
    assert agent.meter.calls == 1
    assert agent.meter.records[0].caller == "agent:1"
    assert agent.meter.records[0].prompt_name == "person.step"


async def test_ask_env_then_finish_acts_in_the_environment(world_factory) -> None:
    world = world_factory([router_says("send_message", {"to_agent_id": 2, "content": "lunch at noon?"})])
    agent, llm = await world.agent(1, [ask_env("ask agent 2 to lunch"), finish("invited agent 2 to lunch")])

    outcome = await agent.step(900, T1)

    assert outcome.status == "finished"
    assert outcome.tools_called == ["ask_env", "finish"]
    assert outcome.env_calls == 2  # observation + ask_env
    assert outcome.turns == 2
    assert "Instruction from agent 1: ask agent 2 to lunch" in world.router_llm.requests[0]["messages"][1]["content"]
    # The router's answer is the observation of the agent's second turn.
    assert llm.requests[1]["messages"][-1] == {
        "role": "user", "content": "Result of ask_env: [success] send_message: message to agent 2 queued for delivery",
    }
    await world.router.step(900, T1)
    assert await world.router.observe(2) == "Inbox (1 messages, latest 1):\n- from agent 1: lunch at noon?"


async def test_finish_flag_on_a_tool_call_ends_the_step_with_the_thought(world_factory) -> None:
    world = world_factory([router_says("read_inbox", {})])
    agent, _ = await world.agent(1, [ask_env("check my messages", done=True)])

    outcome = await agent.step(900, T1)

    assert (outcome.status, outcome.summary, outcome.tools_called) == ("finished", "ask", ["ask_env"])


async def test_invalid_tool_name_is_retried_with_the_valid_names_and_the_valid_reply_proceeds(world_factory) -> None:
    world = world_factory()
    bad = {"thought": "hmm", "action": {"tool": "send_email", "arguments": {"to": "2"}}, "finish": True}
    agent, llm = await world.agent(1, [bad, finish("gave up on email")])

    outcome = await agent.step(900, T1)

    assert outcome.status == "finished"
    assert outcome.summary == "gave up on email"
    assert outcome.turns == 1  # the retry happens inside the turn
    assert len(llm.requests) == 2
    feedback = llm.requests[1]["messages"][-1]["content"]
    assert feedback.startswith("Your previous answer was not valid.")
    assert "Valid tools: ask_env, finish" in feedback
    assert "send_email" in llm.requests[1]["messages"][-2]["content"]


async def test_never_finishing_stops_at_the_turn_limit_without_a_summary(world_factory) -> None:
    world = world_factory([router_says("read_inbox", {})] * 2)
    agent, llm = await world.agent(1, [ask_env("check"), ask_env("check again")], max_react_turns=2)

    outcome = await agent.step(900, T1)

    assert outcome.status == "turn_limit"
    assert outcome.summary is None
    assert outcome.turns == 2
    assert outcome.tools_called == ["ask_env", "ask_env"]
    assert len(llm.requests) == 2
    assert "recent" not in agent.state


async def test_invalid_json_on_every_attempt_is_an_llm_error_not_a_decision(world_factory) -> None:
    world = world_factory()
    agent, llm = await world.agent(1, ["I think I will rest.", "{", '{"thought": "x"}'])

    outcome = await agent.step(900, T1)

    assert outcome.status == "llm_error"
    assert outcome.error is not None and "no valid AgentDecision after 3 attempts" in outcome.error
    assert outcome.summary is None
    assert outcome.tools_called == []
    assert len(llm.requests) == 3
    # Each retry fed the validation error back to the model.
    assert all("Your previous answer was not valid" in r["messages"][-1]["content"] for r in llm.requests[1:])
    # Every attempt is recorded as an llm_calls row, numbered; nothing stands in for the missing decision.
    assert [r.attempt for r in agent.meter.records] == [1, 2, 3]
    assert "recent" not in agent.state
    assert world.router_llm.requests == []


async def test_max_parse_attempts_config_bounds_the_retries(world_factory) -> None:
    world = world_factory()
    agent, llm = await world.agent(1, ["nope"], max_parse_attempts=1)

    outcome = await agent.step(900, T1)

    assert outcome.status == "llm_error"
    assert "after 1 attempts" in outcome.error
    assert len(llm.requests) == 1


async def test_tools_allow_list_restricts_what_is_offered(world_factory) -> None:
    world = world_factory()
    agent, llm = await world.agent(1, [ask_env("look around")] * 3, tools=[])

    outcome = await agent.step(900, T1)

    assert offered_tools(llm.requests[0]) == {"finish"}  # finish is always offered
    assert "- ask_env:" not in llm.requests[0]["messages"][0]["content"]
    assert outcome.status == "llm_error"
    assert world.router_llm.requests == []


async def test_default_offers_the_base_toolsets(world_factory) -> None:
    world = world_factory()
    agent, llm = await world.agent(1, [finish("ok")])
    await agent.step(900, T1)
    assert offered_tools(llm.requests[0]) == {
        "ask_env", "finish", "read", "write", "append", "list", "grep",
        "todo_list", "todo_add", "todo_update", "todo_start", "todo_complete", "todo_defer", "todo_clear_completed",
        "activate_skill", "deactivate_skill", "read_skill_file", "execute_skill_script",
        "memory_search", "memory_recent", "memory_read_summary",
    }
    assert "- ask_env:" in llm.requests[0]["messages"][0]["content"]


async def test_readonly_ask_does_not_change_env_state(world_factory) -> None:
    # The router's model tries to send a message three times; a readonly ask refuses it each time.
    world = world_factory([router_says("send_message", {"to_agent_id": 2, "content": "hi"})] * 3)
    agent, llm = await world.agent(1, [ask_env("tell agent 2 hi"), finish("I could not send anything")])

    answer = await agent.ask("Would you message agent 2?", readonly=True, t=T1)

    assert answer == "I could not send anything"
    assert offered_tools(world.router_llm.requests[0]) == {"read_inbox", "list_groups", "message_statistics", "final_answer"}
    assert llm.requests[1]["messages"][-1]["content"].startswith("Result of ask_env: [error]")
    assert "Someone asks you: Would you message agent 2?" in llm.requests[0]["messages"][-1]["content"]
    assert world.space.updates.all() == []
    await world.router.step(900, T2)
    assert await world.router.observe(2) == "Your inbox is empty."


async def test_ask_reports_a_failed_loop_instead_of_inventing_an_answer(world_factory) -> None:
    world = world_factory()
    agent, _ = await world.agent(1, ["not json"] * 3)

    answer = await agent.ask("How are you?", t=T1)

    assert answer.startswith("[llm_error] no valid AgentDecision")


async def test_ask_does_not_count_as_a_step(world_factory) -> None:
    world = world_factory()
    agent, _ = await world.agent(1, [finish("fine, thanks")])

    assert await agent.ask("How are you?", t=T1) == "fine, thanks"
    assert agent.build_agent_json(tick=None, t=None)["step_count"] == 0
    assert "recent" not in agent.state
