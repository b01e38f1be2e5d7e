"""ask_env sends one typed EnvRequest (template, variables, readonly, trace ids) and shows the reply's status."""

from __future__ import annotations

from pathlib import Path

from engine.agent.person import PersonAgent
from engine.agent.service_proxy import ServiceProxy
from engine.env.requests import EnvReply, EnvRequest
from engine.env.scripted import ScriptedEnv
from engine.llm.client import LLMClient
from engine.trace import TraceRecorder
from engine.trace.handle import TraceHandle


async def agent_on(env: ScriptedEnv, root: Path, *, trace: TraceRecorder | None = None, **config) -> PersonAgent:
    PersonAgent.create(root / "agent_0007", agent_id=7, profile={"name": "P7"}, config=config)
    handle = TraceHandle(root, trace) if trace is not None else None
    return await PersonAgent.from_workspace(
        root / "agent_0007", ServiceProxy(env=env, llm={"default": LLMClient(model="sim/default:test")}, trace=handle))


async def test_an_instruction_travels_as_a_template_with_its_values(tmp_path: Path) -> None:
    env = ScriptedEnv(["message to agent 5 queued"])
    agent = await agent_on(env, tmp_path)

    answer = await agent.ask_env("send a message to agent 5 saying 'hi'")

    assert answer == "[success] message to agent 5 queued"
    assert env.requests == [EnvRequest(
        "ask", 7, "send a message to agent {agent} saying '{text}'", template_mode=True, variables={"agent": 5, "text": "hi"})]


async def test_without_template_mode_the_filled_in_text_goes_read_only_when_asked(tmp_path: Path) -> None:
    env = ScriptedEnv([EnvReply("no such group", "fail")])
    agent = await agent_on(env, tmp_path, env_template_mode=False)

    answer = await agent.ask_env("read group {name}", readonly=True, variables={"name": "choir"})

    assert answer == "[fail] no such group"
    assert env.requests == [EnvRequest("ask", 7, "read group choir", readonly=True)]


async def test_a_traced_ask_carries_its_spans_ids_and_records_the_replys_status(tmp_path: Path) -> None:
    env = ScriptedEnv([EnvReply("later", "in_progress")])
    trace = TraceRecorder()
    agent = await agent_on(env, tmp_path, trace=trace)

    assert await agent.ask_env("read my inbox") == "[in_progress] later"

    [span] = [s for s in trace.spans() if s.name == "env.ask"]
    [request] = env.requests
    assert (request.trace_id, request.parent_span_id) == (span.trace_id, span.span_id)
    assert (span.attrs["status"], span.attrs["template_mode"], request.variables) == ("in_progress", True, {})
