"""docs/minimal_agent.md: its code block runs as written, registers, and steps with a scripted LLM."""

from __future__ import annotations

import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.agent.registry import AGENTS, register_agent, resolve_agent
from engine.agent.service_proxy import ServiceProxy
from engine.env.modules.messaging import MessagingSpace
from engine.env.routers.react import ReActRouter
from engine.llm.backends.scripted import ScriptedModel
from engine.llm.client import LLMClient
from engine.llm.meter import MeteredModel

DOC = Path(__file__).resolve().parents[3] / "docs" / "minimal_agent.md"
T0 = datetime(2024, 1, 1, 9, 0)


def load_doc_namespace() -> dict[str, Any]:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.DOTALL)
    assert len(blocks) == 1, "the doc should have exactly one python block (the agent)"
    namespace: dict[str, Any] = {"__name__": "minimal_agent_doc"}
    exec(compile(blocks[0], str(DOC), "exec"), namespace)  # noqa: S102 - the doc's own code
    return namespace


def finish(summary: str) -> dict[str, Any]:
    return {"thought": "done", "action": {"tool": "finish", "arguments": {"summary": summary}}, "finish": True}


@pytest.fixture
def minimal_agent():
    cls = load_doc_namespace()["MinimalAgent"]
    register_agent(cls)
    try:
        yield cls
    finally:
        AGENTS.unregister("MinimalAgent")


async def test_the_documented_minimal_agent_registers_and_steps(minimal_agent, tmp_path: Path) -> None:
    assert resolve_agent("MinimalAgent") is minimal_agent
    router = ReActRouter([MessagingSpace()], ScriptedModel([]))
    services = ServiceProxy(env=router, llm={"default": LLMClient(model="sim/default:test")})
    path = tmp_path / "agent_0003"
    minimal_agent.create(path, agent_id=3, profile={"name": "Ada"}, config={"max_react_turns": 2})

    for step, summary in enumerate(["looked around", "rested"], start=1):
        agent = await resolve_agent("MinimalAgent").from_workspace(path, services)
        llm = ScriptedModel([finish(summary)])
        agent._dispatcher = MeteredModel(llm, agent.meter, caller="agent:3")

        outcome = await agent.step(3600, T0 + timedelta(hours=step))
        agent.commit_step(step, {})
        await agent.to_workspace()

        assert (outcome.status, outcome.summary, outcome.env_calls) == ("finished", summary, 1)
        system = llm.requests[0]["messages"][0]["content"]
        assert system.startswith("You are Ada (agent 3).")
        assert f"You have taken {step - 1} steps so far." in system  # restored from the workspace
        assert "Your inbox is empty." in llm.requests[0]["messages"][1]["content"]
        assert agent.meter.records[0].prompt_name == "minimal.system"

    assert agent.workspace.read_json("AGENT.json")["state"] == {"steps_taken": 2}


async def test_the_documented_minimal_agent_answers_a_question(minimal_agent, tmp_path: Path) -> None:
    services = ServiceProxy(env=ReActRouter([MessagingSpace()], ScriptedModel([])), llm={"default": LLMClient(model="sim/default:test")})
    path = tmp_path / "agent_0004"
    minimal_agent.create(path, agent_id=4, profile={"name": "Bo"}, config={})
    agent = await minimal_agent.from_workspace(path, services)
    llm = ScriptedModel([finish("Fine, thanks.")])
    agent._dispatcher = MeteredModel(llm, agent.meter, caller="agent:4")

    assert await agent.ask("How are you?", t=T0) == "Fine, thanks."
    assert "Someone asks you: How are you?" in llm.requests[0]["messages"][1]["content"]
