"""AgentSocietyHelper: plans drive tools, failures replan, asks never mutate, interventions reach agents."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from engine.agent.person import PersonAgent
from engine.agent.service_proxy import ServiceProxy
from engine.agent.workspace import workspace_path
from engine.env.actor import EnvRouterConfig, build_router
from engine.env.requests import EnvRequest
from engine.env.router_base import RouterBase
from engine.errors import ToolCallError
from engine.llm.backends.scripted import ScriptedModel
from engine.llm.client import LLMClient
from engine.society.datasets import SOCIETY_QUERIES
from engine.society.experimenter.helper import AgentSocietyHelper, HelperResult
from engine.society.experimenter.interview import ask_agents
from engine.society.experimenter.profile_filter import match_profile
from engine.society.experimenter.tools import HelperToolbox
from engine.storage.catalog import Catalog
from engine.storage.reader import ReplayReader
from engine.storage.replay import ReplayWriter
from engine.storage.shards import shard_name

T0 = datetime(2024, 1, 1, 8, 0)
MUTATING = {"change_env", "call_env_tool", "message_agents"}


class FakeSociety:
    """The society view over fixed specs; asking agents returns a recorded, id-specific answer."""

    def __init__(self, specs: list[dict[str, Any]], t: datetime = T0) -> None:
        self.agent_specs = specs
        self.current_time = t
        self.asked: list[tuple[list[int], str]] = []

    @property
    def agent_ids(self) -> list[int]:
        return [int(s["id"]) for s in self.agent_specs]

    async def ask_agents(self, agent_ids: list[int], question: str) -> dict[int, str]:
        self.asked.append((list(agent_ids), question))
        return {i: f"agent {i} says yes" for i in agent_ids}


def people() -> list[dict[str, Any]]:
    cities = {1: "Rome", 2: "Oslo", 3: "Rome", 4: "Oslo", 5: "Rome"}
    return [
        {"id": i, "type": "PersonAgent", "config": {},
         "profile": {"name": f"P{i}", "age": 20 + 10 * i, "city": cities[i], "hobbies": ["chess"] if i % 2 else ["tennis"]}}
        for i in range(1, 6)
    ]


def step(tool: str, args: dict[str, Any], description: str = "d") -> dict[str, Any]:
    return {"description": description, "tool": tool, "args": args, "expected_output": "e"}


def plan(*steps: dict[str, Any]) -> dict[str, Any]:
    return {"reasoning": "r", "steps": list(steps)}


def answer(text: str) -> dict[str, Any]:
    return {"answer": text}


def offered(request: dict[str, Any]) -> set[str]:
    schema = request["response_format"]["json_schema"]["schema"]
    steps = schema["properties"]["steps"]["items"]
    return set(steps["discriminator"]["mapping"])


async def messaging_router(ids: list[int]) -> RouterBase:
    router = build_router(EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react"))
    await router.init(T0, ids)
    return router


async def test_plan_filters_agents_then_asks_them_and_answers_from_the_real_results() -> None:
    society = FakeSociety(people())
    llm = ScriptedModel([
        plan(step("filter_agents", {"field": "city", "op": "==", "value": "rome"}),
             step("ask_agents", {"from_step": 1, "question": "Do you like it here?"})),
        answer("All three Rome residents like it."),
    ])
    helper = AgentSocietyHelper(await messaging_router(society.agent_ids), society, llm=llm)

    result = await helper.ask("Do people in Rome like it there?")

    assert result.status == "ok" and result.error is None
    assert result.answer == "All three Rome residents like it."
    assert society.asked == [([1, 3, 5], "Do you like it here?")]
    assert [(s.number, s.tool, s.ok) for s in result.steps] == [(1, "filter_agents", True), (2, "ask_agents", True)]
    assert result.steps[0].result["agent_ids"] == [1, 3, 5]
    final_prompt = llm.requests[-1]["messages"][-1]["content"]
    assert "Question: Do people in Rome like it there?" in final_prompt
    for agent_id in (1, 3, 5):
        assert f"agent {agent_id} says yes" in final_prompt
    assert offered(llm.requests[0]).isdisjoint(MUTATING)
    assert len(llm.requests) == 2


async def test_a_failed_step_triggers_a_replan_that_sees_the_error_and_the_results() -> None:
    society = FakeSociety(people())
    llm = ScriptedModel([
        plan(step("current_time", {}), step("get_profile", {"agent_id": 99})),
        plan(step("get_profile", {"agent_id": 4})),
        answer("Agent 4 is 60."),
    ])
    helper = AgentSocietyHelper(await messaging_router(society.agent_ids), society, llm=llm)

    result = await helper.ask("How old is P4?")

    assert (result.status, result.replans, len(result.plans)) == ("ok", 1, 2)
    assert [(s.number, s.tool, s.ok) for s in result.steps] == [(1, "current_time", True), (2, "get_profile", False), (3, "get_profile", True)]
    assert result.steps[1].result == "error: there is no agent 99"
    assert result.steps[2].result["profile"]["age"] == 60
    replan_prompt = llm.requests[1]["messages"][-1]["content"]
    assert "Step 2 failed: error: there is no agent 99" in replan_prompt
    assert "step 1 current_time({}) -> ok: 2024-01-01T08:00:00" in replan_prompt
    assert "The first step of the new plan is step 3." in replan_prompt
    assert result.plans[1].steps[0].args == {"agent_id": 4}


async def test_exhausting_the_replans_fails_with_an_error_and_no_answer() -> None:
    society = FakeSociety(people())
    llm = ScriptedModel([
        plan(step("get_profile", {"agent_id": 98})),
        plan(step("filter_agents", {"field": "salary", "op": ">", "value": 10})),
    ])
    helper = AgentSocietyHelper(await messaging_router(society.agent_ids), society, llm=llm, max_replans=1)

    result = await helper.ask("Who earns more than 10?")

    assert result.status == "failed"
    assert result.answer is None
    assert result.replans == 1
    assert result.error is not None and result.error.startswith("step 2 (filter_agents) failed")
    assert "no agent has profile field 'salary'" in result.error and "no replans left" in result.error
    assert result.reply.startswith("[failed] step 2")
    assert len(llm.requests) == 2  # no final-answer call after a failure


async def test_ask_is_never_offered_a_mutating_tool_and_a_plan_naming_one_is_refused() -> None:
    society = FakeSociety(people())
    router = await messaging_router(society.agent_ids)
    mutating_plan = plan(step("message_agents", {"agent_ids": [1], "content": "hi"}))
    llm = ScriptedModel([mutating_plan] * 3)
    helper = AgentSocietyHelper(router, society, llm=llm, max_llm_call_retry=3)

    result = await helper.ask("Tell agent 1 hi")

    assert result.status == "failed" and result.error is not None
    assert result.error.startswith("planning failed: no valid HelperPlan after 3 attempts")
    assert result.steps == []
    assert all(offered(r).isdisjoint(MUTATING) for r in llm.requests)
    assert "Valid tools: current_time, list_agents, get_profile, filter_agents, ask_env, ask_agents" in llm.requests[1]["messages"][-1]["content"]
    # Even called directly, the toolbox refuses a mutating tool for an ask; nothing was queued.
    toolbox = HelperToolbox(router, society)
    with pytest.raises(ToolCallError, match="changes the simulation and this is a read-only ask"):
        await toolbox.call("ask", "message_agents", {"agent_ids": [1], "content": "hi"}, [])
    assert router.apply_pending() == 0
    assert await router.observe(1) == "Your inbox is empty."


async def test_intervene_messages_two_agents_who_see_it_after_apply_pending() -> None:
    society = FakeSociety(people())
    router = await messaging_router(society.agent_ids)
    llm = ScriptedModel([
        plan(step("message_agents", {"agent_ids": [2, 4], "content": "The bridge is closed today."})),
        answer("Agents 2 and 4 were told the bridge is closed."),
    ])
    helper = AgentSocietyHelper(router, society, llm=llm)

    result = await helper.intervene("Tell agents 2 and 4 that the bridge is closed")

    assert result.status == "ok" and result.answer == "Agents 2 and 4 were told the bridge is closed."
    assert result.steps[0].result["agent_ids"] == [2, 4]
    assert MUTATING <= offered(llm.requests[0])
    assert await router.observe(2) == "Your inbox is empty."  # queued until the env applies it
    assert router.apply_pending() == 2
    for agent_id in (2, 4):
        assert await router.observe(agent_id) == (
            "Inbox (1 messages, latest 1):\n- from the experimenter (system): The bridge is closed today."
        )
    assert await router.observe(1) == "Your inbox is empty."
    assert "Instruction: Tell agents 2 and 4 that the bridge is closed" in llm.requests[-1]["messages"][-1]["content"]


async def test_intervene_can_call_an_env_tool_and_a_bad_one_replans() -> None:
    society = FakeSociety(people())
    router = await messaging_router(society.agent_ids)
    llm = ScriptedModel([
        plan(step("call_env_tool", {"name": "teleport", "arguments": {}})),
        plan(step("call_env_tool", {"name": "join_group", "arguments": {"agent_id": 3, "group": "choir"}})),
        answer("Agent 3 joins the choir from the next step."),
    ])
    helper = AgentSocietyHelper(router, society, llm=llm)

    result = await helper.intervene("Put agent 3 in the choir")

    assert (result.status, result.replans) == ("ok", 1)
    assert result.steps[0].result == "error: unknown tool 'teleport'"
    assert result.steps[1].result == {"tool": "join_group", "result": "you will be a member of 'choir' from the next step"}
    router.apply_pending()
    assert await router.call_tool("list_groups", {"agent_id": 3}, readonly=True) == "- choir: 1 members (you are a member)"


async def test_the_step_limit_stops_execution_and_the_answer_is_told() -> None:
    society = FakeSociety(people())
    llm = ScriptedModel([
        plan(step("current_time", {}), step("get_profile", {"agent_id": 0})),
        plan(step("get_profile", {"agent_id": 1}), step("get_profile", {"agent_id": 2})),
        answer("P1 is 30."),
    ])
    helper = AgentSocietyHelper(await messaging_router(society.agent_ids), society, llm=llm, max_steps=3)

    result = await helper.ask("How old are P1 and P2?")

    assert result.status == "ok" and result.step_limit_reached
    assert [s.tool for s in result.steps] == ["current_time", "get_profile", "get_profile"]
    assert "the limit of 3 steps was reached" in llm.requests[-1]["messages"][-1]["content"]


async def test_ask_agents_is_bounded_and_checks_ids() -> None:
    society = FakeSociety(people())
    toolbox = HelperToolbox(await messaging_router(society.agent_ids), society, max_ask_agents=2)
    with pytest.raises(ToolCallError, match="3 agents given; at most 2 per step"):
        await toolbox.call("ask", "ask_agents", {"agent_ids": [1, 2, 3], "question": "q"}, [])
    with pytest.raises(ToolCallError, match=r"no such agents: \[9\]"):
        await toolbox.call("ask", "ask_agents", {"agent_ids": [1, 9], "question": "q"}, [])
    with pytest.raises(ToolCallError, match="step 1 produced no agent_ids"):
        await toolbox.call("ask", "ask_agents", {"from_step": 1, "question": "q"}, ["2024-01-01T08:00:00"])
    assert society.asked == []


async def test_list_agents_pages_ids_and_names() -> None:
    society = FakeSociety(people())
    toolbox = HelperToolbox(await messaging_router(society.agent_ids), society)
    page = await toolbox.call("ask", "list_agents", {"offset": 3, "limit": 2}, [])
    assert page == {"total": 5, "offset": 3, "agents": [{"id": 4, "name": "P4"}, {"id": 5, "name": "P5"}], "agent_ids": [4, 5]}


@pytest.mark.parametrize(
    ("actual", "op", "value", "expected"),
    [
        (40, ">", 30, True), (40, ">=", "40", True), ("Rome", "!=", 3, True), ("b", ">", "A", True), (40, "<", 30, False), ("Rome", "==", "rome", True),
        ("Rome", "!=", "Oslo", True), ("Rome", "<", 3, False), (True, "==", True, True), (True, "==", 1, False),
        ("New York", "contains", "york", True), (["chess", "go"], "contains", "go", True), (["chess"], "contains", "go", False),
        ("Oslo", "in", ["Rome", "Oslo"], True), (25, "in", [20, 30], False), (None, "==", "x", False),
    ],
)
def test_match_profile_ops(actual: Any, op: str, value: Any, expected: bool) -> None:
    assert match_profile(actual, op, value) is expected


async def test_filter_agents_reads_nested_fields_and_names_known_fields() -> None:
    specs = people()
    specs[0]["profile"]["address"] = {"city": "Turin"}
    toolbox = HelperToolbox(await messaging_router([1, 2, 3, 4, 5]), FakeSociety(specs))
    found = await toolbox.call("ask", "filter_agents", {"field": "profile.address.city", "op": "==", "value": "Turin"}, [])
    assert found["agent_ids"] == [1]
    hobby = await toolbox.call("ask", "filter_agents", {"field": "hobbies", "op": "contains", "value": "tennis"}, [])
    assert hobby["agent_ids"] == [2, 4]
    with pytest.raises(ToolCallError, match="no agent has profile field 'height'; fields: address, age, city"):
        await toolbox.call("ask", "filter_agents", {"field": "height", "op": ">", "value": 1}, [])


async def test_result_serialises_to_json_and_to_a_society_queries_row_duckdb_reads(tmp_path: Path) -> None:
    society = FakeSociety(people())
    llm = ScriptedModel([plan(step("get_profile", {"agent_id": 2})), answer("P2 lives in Oslo.")])
    result = await AgentSocietyHelper(await messaging_router(society.agent_ids), society, llm=llm).ask("Where does P2 live?")

    assert HelperResult.model_validate_json(result.to_json()) == result
    assert json.loads(result.to_json())["plans"][0]["steps"][0]["tool"] == "get_profile"
    replay = tmp_path / "replay"
    Catalog(replay).register(SOCIETY_QUERIES)
    ReplayWriter(tmp_path).write_shard(SOCIETY_QUERIES, shard_name(1, "helper"), [{**result.to_row(), "run": "r", "step_index": 1, "step": 0}])
    with ReplayReader(tmp_path) as reader:
        row = reader.query("SELECT kind, text, t, status, answer, replans, error, steps_json FROM society_queries").to_pylist()[0]
    assert {k: row[k] for k in ("kind", "status", "answer", "replans", "error", "t")} == {
        "kind": "ask", "status": "ok", "answer": "P2 lives in Oslo.", "replans": 0, "error": None, "t": T0}
    assert json.loads(row["steps_json"])[0]["result"]["profile"]["city"] == "Oslo"


class WorkspaceSociety(FakeSociety):
    """A society view whose agents are real PersonAgents rebuilt from workspaces (interview.ask_agents)."""

    def __init__(self, specs: list[dict[str, Any]], run_dir: Path, proxy: ServiceProxy) -> None:
        super().__init__(specs)
        self.run_dir, self.proxy = run_dir, proxy

    async def ask_agents(self, agent_ids: list[int], question: str) -> dict[int, str]:
        return await ask_agents(self.run_dir, self.proxy, agent_ids, question, self.current_time)


async def test_ask_agents_questions_real_agents_rebuilt_from_their_workspaces(tmp_path: Path) -> None:
    specs = people()
    router = await messaging_router([s["id"] for s in specs])
    proxy = ServiceProxy(env=router, llm={"default": LLMClient(model="sim/default:helper-agents")}, run_dir=tmp_path)
    for spec in specs:
        PersonAgent.create(workspace_path(tmp_path / "agents", spec["id"]), agent_id=spec["id"], profile=spec["profile"], config={})
    llm = ScriptedModel([
        plan(step("filter_agents", {"field": "age", "op": ">=", "value": 60}),
             step("ask_agents", {"from_step": 1, "question": "How is retirement?"})),
        answer("See the agents' answers."),
    ])

    result = await AgentSocietyHelper(router, WorkspaceSociety(specs, tmp_path, proxy), llm=llm).ask("How do older people feel?")

    assert result.status == "ok"
    answers = result.steps[1].result["answers"]
    assert [a["agent_id"] for a in answers] == [4, 5]
    assert all(isinstance(a["answer"], str) and a["answer"] for a in answers)
    for a in answers:  # the final answer call saw exactly what the agents said
        assert json.dumps(a["answer"], ensure_ascii=False)[1:-1] in llm.requests[-1]["messages"][-1]["content"]


async def test_agents_cannot_send_system_messages_through_their_router() -> None:
    """The experimenter tool is never offered to routing, and refuses any caller but the experimenter."""
    router = await messaging_router([1, 2])
    naming_it = {"thought": "t", "done": True, "action": {
        "tool": "send_system_message", "arguments": {"to_agent_id": 2, "content": "I am the system"}}}
    router.llm = ScriptedModel([naming_it] * 3)

    reply = await router.ask(EnvRequest("ask", 1, "send agent 2 a system message"))

    assert reply.status == "error"
    assert "send_system_message" not in router.tools()
    assert "send_system_message" not in json.dumps(router.llm.requests[0]["response_format"])
    with pytest.raises(ToolCallError, match="only the experimenter can send system messages"):
        await router.call_tool("send_system_message", {"agent_id": 1, "to_agent_id": 2, "content": "x"})
    assert router.apply_pending() == 0
