"""A PersonAgent's workspace: what ``create`` writes, what ``from_workspace`` rebuilds, what a step appends."""

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
from engine.errors import WorkspaceError
from engine.llm.backends.scripted import ScriptedModel
from engine.llm.client import LLMClient
from engine.llm.meter import MeteredModel

T1 = datetime(2024, 1, 1, 8, 15)
T2 = datetime(2024, 1, 1, 8, 30)
PROFILE = {"name": "Ada", "age": 36, "occupation": "engineer"}
CONFIG = {"max_react_turns": 3, "tools": ["ask_env"]}


@pytest.fixture
def services() -> ServiceProxy:
    router = build_router(EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react"))
    return ServiceProxy(env=router, llm={"default": LLMClient(model="sim/default:test")})


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    path = workspace_path(tmp_path / "agents", 7)
    PersonAgent.create(path, agent_id=7, profile=PROFILE, config=CONFIG)
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def finish(summary: str) -> dict[str, Any]:
    return {"thought": "done", "action": {"tool": "finish", "arguments": {"summary": summary}}, "finish": True}


def test_workspace_path_pads_the_id_to_four_digits(tmp_path: Path) -> None:
    assert workspace_path(tmp_path, 7).name == "agent_0007"
    assert workspace_path(tmp_path, 12345).name == "agent_12345"


def test_create_writes_config_agent_json_and_directories(ws: Path) -> None:
    assert json.loads((ws / "config.json").read_text()) == {
        "id": 7, "type": "PersonAgent", "profile": PROFILE, "config": CONFIG,
    }
    assert json.loads((ws / "AGENT.json").read_text()) == {"id": 7, "type": "PersonAgent", "step_count": 0, "state": {}}
    for sub in ("state", "memory", "custom/skills", ".runtime/logs"):
        assert (ws / sub).is_dir(), sub


async def test_from_workspace_rebuilds_id_profile_and_config(ws: Path, services: ServiceProxy) -> None:
    agent = await PersonAgent.from_workspace(ws, services)

    assert agent.id == 7
    assert agent.profile == PROFILE
    assert agent.config == CONFIG
    assert agent.name == "Ada"
    assert agent.state == {}
    assert agent._env is services.env


async def test_from_workspace_keeps_state_and_step_count_from_agent_json(ws: Path, services: ServiceProxy) -> None:
    (ws / "AGENT.json").write_text(json.dumps({"id": 7, "step_count": 4, "state": {"recent": ["x"]}}))
    agent = await PersonAgent.from_workspace(ws, services)
    assert agent.state == {"recent": ["x"]}
    assert agent.build_agent_json(tick=None, t=None)["step_count"] == 4


async def test_corrupt_agent_json_raises_workspace_error(ws: Path, services: ServiceProxy) -> None:
    (ws / "AGENT.json").write_text('{"id": 7, "step_count": ')
    with pytest.raises(WorkspaceError, match="AGENT.json is corrupt"):
        await PersonAgent.from_workspace(ws, services)


async def test_missing_config_json_raises_workspace_error(ws: Path, services: ServiceProxy) -> None:
    (ws / "config.json").unlink()
    with pytest.raises(WorkspaceError, match="config.json does not exist"):
        await PersonAgent.from_workspace(ws, services)


async def test_disagreeing_ids_raise_workspace_error(ws: Path, services: ServiceProxy) -> None:
    (ws / "AGENT.json").write_text(json.dumps({"id": 8, "step_count": 0, "state": {}}))
    with pytest.raises(WorkspaceError, match="disagree on the agent id"):
        await PersonAgent.from_workspace(ws, services)


async def test_step_then_to_workspace_counts_the_step_and_appends_logs(ws: Path, services: ServiceProxy) -> None:
    logs = ws / ".runtime" / "logs"

    agent = await PersonAgent.from_workspace(ws, services)
    agent._dispatcher = MeteredModel(ScriptedModel([
        {"thought": "look around", "action": {"tool": "ask_env", "arguments": {"instruction": "read my inbox"}},
         "finish": False},
        finish("checked my inbox"),
    ]), agent.meter, caller="agent:7")
    outcome = await agent.step(900, T1)
    await agent.to_workspace()

    assert outcome.status == "finished"
    saved = json.loads((ws / "AGENT.json").read_text())
    assert saved["step_count"] == 1
    assert saved["current_time"] == T1.isoformat()
    assert saved["state"]["recent"] == [f"{T1.isoformat()}: checked my inbox"]
    thread = read_jsonl(logs / "thread_messages.jsonl")
    assert [m["role"] for m in thread] == ["system", "user", "assistant", "user", "assistant"]
    assert all(m["t"] == T1.isoformat() for m in thread)
    (call,) = read_jsonl(logs / "tool_calls.jsonl")
    assert call["tool"] == "ask_env"
    assert call["arguments"] == {"instruction": "read my inbox"}
    assert call["result"].startswith("[")

    # A second task rebuilds the agent from what the first wrote, and appends rather than rewrites.
    again = await PersonAgent.from_workspace(ws, services)
    again._dispatcher = MeteredModel(ScriptedModel([finish("rested")]), again.meter, caller="agent:7")
    await again.step(900, T2)
    await again.to_workspace()

    saved = json.loads((ws / "AGENT.json").read_text())
    assert saved["step_count"] == 2
    assert [r.split(": ", 1)[1] for r in saved["state"]["recent"]] == ["checked my inbox", "rested"]
    assert len(read_jsonl(logs / "thread_messages.jsonl")) == len(thread) + 3
    assert len(read_jsonl(logs / "tool_calls.jsonl")) == 1
    # Nothing is flushed twice: the in-memory logs were emptied by to_workspace.
    await again.to_workspace()
    assert len(read_jsonl(logs / "thread_messages.jsonl")) == len(thread) + 3
