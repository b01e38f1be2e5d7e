"""Interviewing agents rebuilds them from their workspaces, asks read-only, and writes nothing back."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import pytest

from engine.agent.person import PersonAgent
from engine.agent.registry import register_agent
from engine.agent.service_proxy import ServiceProxy
from engine.agent.workspace import workspace_path
from engine.env.actor import EnvRouterConfig, build_router
from engine.env.router_base import RouterBase
from engine.errors import BudgetExhaustedError, WorkspaceError
from engine.llm.backends.scripted import ScriptedModel
from engine.llm.budget import Allowance, BudgetGate
from engine.llm.client import LLMClient
from engine.llm.meter import MeteredModel
from engine.society.experimenter.interview import ask_agents

T0 = datetime(2024, 1, 1, 8, 0)
T1 = datetime(2024, 1, 1, 9, 0)


class InterviewScriptedPerson(PersonAgent):
    """A PersonAgent whose model replays ``replies[agent id]`` (one ScriptedModel per rebuild)."""

    replies: ClassVar[dict[int, list[Any]]] = {}
    models: ClassVar[dict[int, ScriptedModel]] = {}

    def _bind_services(self, service_proxy: ServiceProxy) -> None:
        super()._bind_services(service_proxy)
        model = self.models[self.id] = ScriptedModel(self.replies.pop(self.id, []))
        self._dispatcher = MeteredModel(model, self.meter, caller=f"agent:{self.id}")


register_agent(InterviewScriptedPerson)


def decision(tool: str, arguments: dict[str, Any], *, finish: bool = False) -> dict[str, Any]:
    return {"thought": "t", "action": {"tool": tool, "arguments": arguments}, "finish": finish}


def finish(summary: str, memory: str) -> dict[str, Any]:
    return decision("finish", {"summary": summary, "memories": [{"kind": "fact", "text": memory}]}, finish=True)


def snapshot(root: Path) -> dict[str, Any]:
    """Every entry under ``root``: file bytes, symlink targets (AGENT.json is swapped by symlink), directories."""
    entries: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        key = str(path.relative_to(root))
        if path.is_symlink():
            entries[key] = ("link", os.readlink(path))
        elif path.is_dir():
            entries[key] = ("dir",)
        else:
            entries[key] = ("file", path.read_bytes())
    return entries


def offered_tools(request: dict[str, Any]) -> set[str]:
    schema = request["response_format"]["json_schema"]["schema"]
    return set(schema["properties"]["action"]["discriminator"]["mapping"])


async def scripted_run(tmp_path: Path, ids: list[int], router_replies: list[Any]) -> tuple[ServiceProxy, ScriptedModel]:
    """Workspaces of InterviewScriptedPerson agents that each ran one step (so memory and logs are not empty)."""
    router_llm = ScriptedModel(router_replies)
    router = build_router(EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react"))
    router.llm = router_llm
    await router.init(T0, ids)
    proxy = ServiceProxy(env=router, llm={"default": LLMClient(model="sim/default:interview")}, run_dir=tmp_path)
    for agent_id in ids:
        ws = workspace_path(tmp_path / "agents", agent_id)
        InterviewScriptedPerson.create(ws, agent_id=agent_id, profile={"name": f"P{agent_id}"}, config={})
        InterviewScriptedPerson.replies[agent_id] = [finish("had breakfast", "breakfast was good")]
        agent = await InterviewScriptedPerson.from_workspace(ws, proxy)
        await agent.step(3600, T0)
        await agent.to_workspace()
    return proxy, router_llm


async def test_readonly_ask_answers_and_leaves_workspaces_byte_for_byte_unchanged(tmp_path: Path) -> None:
    proxy, router_llm = await scripted_run(tmp_path, [1, 2], [{"thought": "r", "action": {"tool": "read_inbox", "arguments": {}}, "done": True}])
    InterviewScriptedPerson.replies[1] = [decision("ask_env", {"instruction": "check my inbox"}), finish("I like tea", "asked about tea")]
    InterviewScriptedPerson.replies[2] = [finish("I prefer coffee", "asked about coffee")]
    before = snapshot(tmp_path / "agents")

    answers = await ask_agents(tmp_path, proxy, [1, 2, 1], "Tea or coffee?", T1)

    assert answers == {1: "I like tea", 2: "I prefer coffee"}
    assert snapshot(tmp_path / "agents") == before
    # The agents really reasoned over the question, with read-only tools only, also at the env.
    first_turn = InterviewScriptedPerson.models[1].requests[0]
    assert "Someone asks you: Tea or coffee?" in first_turn["messages"][-1]["content"]
    assert T1.isoformat() in first_turn["messages"][-2]["content"]  # the time comes before the question, after the fixed prompt
    assert offered_tools(first_turn) >= {"ask_env", "finish", "read"}
    assert offered_tools(first_turn).isdisjoint({"write", "append", "todo_add", "activate_skill", "execute_skill_script"})
    router_schema = router_llm.requests[-1]["response_format"]["json_schema"]["schema"]
    assert "send_message" not in str(router_schema) and "read_inbox" in str(router_schema)


async def test_each_agent_that_answered_is_counted_as_its_answer_comes(tmp_path: Path) -> None:
    proxy, _ = await scripted_run(tmp_path, [1, 2], [])
    InterviewScriptedPerson.replies[1] = [finish("tea", "asked about tea")]
    InterviewScriptedPerson.replies[2] = [finish("coffee", "asked about coffee")]
    answered: list[int] = []

    answers = await ask_agents(tmp_path, proxy, [1, 2, 1], "Tea or coffee?", T1, on_answer=lambda: answered.append(len(answered) + 1))

    assert answers == {1: "tea", 2: "coffee"} and answered == [1, 2]  # duplicates are asked, and counted, once


async def test_the_snapshot_detects_what_a_non_readonly_ask_would_remember(tmp_path: Path) -> None:
    """Control for the test above: the same ask without readonly stores its memory in the workspace."""
    proxy, _ = await scripted_run(tmp_path, [1], [])
    InterviewScriptedPerson.replies[1] = [finish("I like tea", "asked about tea")]
    before = snapshot(tmp_path / "agents")
    agent = await InterviewScriptedPerson.from_workspace(workspace_path(tmp_path / "agents", 1), proxy)

    assert await agent.ask("Tea or coffee?", readonly=False, t=T1) == "I like tea"

    after = snapshot(tmp_path / "agents")
    changed = {key for key in after if after[key] != before.get(key)}
    assert changed and all(key.startswith("agent_0001/") for key in changed)


async def test_missing_workspace_fails_before_anyone_is_asked(tmp_path: Path) -> None:
    proxy, _ = await scripted_run(tmp_path, [1], [])
    InterviewScriptedPerson.replies[1] = [finish("unused", "unused")]

    with pytest.raises(WorkspaceError, match=r"no workspace for agents \[7\]"):
        await ask_agents(tmp_path, proxy, [1, 7], "Hello?", T1)

    assert InterviewScriptedPerson.replies[1] == [finish("unused", "unused")]


async def test_sim_llm_agents_answer_without_touching_their_workspaces(tmp_path: Path) -> None:
    router: RouterBase = build_router(EnvRouterConfig(
        modules=(("MessagingSpace", {}),), router="react", coder=LLMClient(role="coder", model="sim/default:interview-router")))
    await router.init(T0, [3, 4])
    proxy = ServiceProxy(env=router, llm={"default": LLMClient(model="sim/default:interview", seed=7)}, run_dir=tmp_path)
    for agent_id in (3, 4):
        ws = workspace_path(tmp_path / "agents", agent_id)
        PersonAgent.create(ws, agent_id=agent_id, profile={"name": f"P{agent_id}", "job": "baker"}, config={})
        agent = await PersonAgent.from_workspace(ws, proxy)
        await agent.step(3600, T0)
        await agent.to_workspace()
    router.reset_tool_call_history()
    before = snapshot(tmp_path / "agents")

    answers = await ask_agents(tmp_path, proxy, [3, 4], "What do you do for a living?", T1)

    assert sorted(answers) == [3, 4]
    assert all(isinstance(a, str) and a for a in answers.values())
    assert snapshot(tmp_path / "agents") == before
    assert all(not record["function_name"].startswith(("send_", "post_", "join_")) for record in router.get_tool_call_history())


async def test_interview_calls_are_recorded_and_charged_to_the_budget(tmp_path: Path) -> None:
    router: RouterBase = build_router(EnvRouterConfig(
        modules=(("MessagingSpace", {}),), router="react", coder=LLMClient(role="coder", model="sim/default:interview-router")))
    await router.init(T0, [5, 6])
    proxy = ServiceProxy(env=router, llm={"default": LLMClient(model="sim/default:interview", seed=3)}, run_dir=tmp_path)
    for agent_id in (5, 6):
        PersonAgent.create(workspace_path(tmp_path / "agents", agent_id), agent_id=agent_id, profile={"name": f"P{agent_id}"}, config={})
    records: list = []
    gate = BudgetGate(Allowance(calls=100))

    await ask_agents(tmp_path, proxy, [5, 6], "How are you?", T1, records=records, budget=gate)

    assert {r.caller for r in records} == {"agent:5", "agent:6"}
    assert gate.used.calls == sum(1 for r in records if r.status == "ok" and not r.cached) >= 2

    starved = BudgetGate(Allowance(calls=0))
    with pytest.raises(BudgetExhaustedError):
        await ask_agents(tmp_path, proxy, [5], "And now?", T1, budget=starved)
