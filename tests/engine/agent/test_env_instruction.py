"""Agents send ask_env in template mode: instructions become templates whose values travel as variables."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from engine.agent.contrib import RuleBasedAgent
from engine.agent.env_instruction import templatize
from engine.agent.person import PersonAgent
from engine.agent.service_proxy import ServiceProxy
from engine.agent.tools import ASK_ENV_EXAMPLES
from engine.env.modules.messaging import MessagingSpace
from engine.env.routers.codegen import CodeGenRouter
from engine.llm.backends.scripted import ScriptedModel
from engine.llm.client import LLMClient
from engine.llm.meter import MeteredModel

T1 = datetime(2024, 1, 1, 8, 15)
SEND_CODE = 'send_message(to_agent_id=variables["agent"], content=variables["text"])'


@pytest.mark.parametrize(("instruction", "template", "variables"), [
    ("send a message to agent 5 saying 'see you at noon'", "send a message to agent {agent} saying '{text}'",
     {"agent": 5, "text": "see you at noon"}),
    ("post 'hi all' to group 'town square'", "post '{text}' to group '{text_2}'", {"text": "hi all", "text_2": "town square"}),
    ("play defect in round 3 of the prisoner's dilemma against agent 2",
     "play defect in round {number} of the prisoner's dilemma against agent {agent}", {"number": 3, "agent": 2}),
    ("meet player #12 at 10:30 on 2024-05-01", "meet player #{agent} at {time} on {time_2}",
     {"agent": 12, "time": "10:30", "time_2": "2024-05-01"}),
    ("say 'don't go' and pay 2.50 or 3.5 coins", "say '{text}' and pay {number} or {number_2} coins",
     {"text": "don't go", "number": "2.50", "number_2": 3.5}),
    ('he said "hello there" and “bye”', 'he said "{text}" and “{text_2}”', {"text": "hello there", "text_2": "bye"}),
    ("read my inbox", "read my inbox", {}),
])
def test_literal_values_become_placeholders_and_filling_gives_the_instruction_back(instruction, template, variables) -> None:
    request = templatize(instruction)
    assert (request.template, request.variables, request.missing) == (template, variables, ())
    assert request.text == instruction


def test_the_same_sentence_with_other_values_gives_the_same_template() -> None:
    a = templatize("send a message to agent 2 saying 'hello'")
    b = templatize("send a message to agent 17 saying 'shall we meet at 5?'")
    assert a.template == b.template and a.variables != b.variables
    # The sim's examples collapse into a few templates: the three "send" examples are one.
    assert len({templatize(e).template for e in ASK_ENV_EXAMPLES}) == len(ASK_ENV_EXAMPLES) - 2


def test_the_models_own_placeholders_are_kept_and_unused_variables_are_dropped() -> None:
    request = templatize("tell agent {to} '{text}' about 3 things", {"to": 4, "text": "hi", "spare": 1})
    assert request.template == "tell agent {to} '{text}' about {number} things"
    assert request.variables == {"to": 4, "text": "hi", "number": 3}
    # An unused variable reserves no name: the template does not depend on it.
    assert templatize("pay 3 coins", {"number": 9}).template == templatize("pay 3 coins").template == "pay {number} coins"


def test_a_placeholder_without_a_value_is_reported() -> None:
    request = templatize("send {text} to agent {to}", {"to": 2})
    assert request.missing == ("text",) and request.variables == {"to": 2}


def test_without_literals_only_the_models_placeholders_are_filled() -> None:
    request = templatize("send {text} to agent 3", {"text": "hi"}, literals=False)
    assert (request.template, request.text) == ("send {text} to agent 3", "send hi to agent 3")


# ---- agents against a CodeGen router ----------------------------------------------------------------
def ask(instruction: str, variables: dict[str, Any] | None = None, *, done: bool = True) -> dict[str, Any]:
    arguments: dict[str, Any] = {"instruction": instruction}
    if variables is not None:
        arguments["variables"] = variables
    return {"thought": "ask", "action": {"tool": "ask_env", "arguments": arguments}, "finish": done}


class World:
    """A MessagingSpace behind an in-process CodeGenRouter with a scripted coder."""

    def __init__(self, root: Path, coder_replies: list[str]) -> None:
        self.root = root
        self.space = MessagingSpace()
        self.coder = ScriptedModel([{"thought": "code", "code": c} for c in coder_replies])
        self.router = CodeGenRouter([self.space], self.coder)
        self.services = ServiceProxy(env=self.router, llm={"default": LLMClient(model="sim/default:test")})

    async def agent(self, cls: type, agent_id: int, replies: list[Any], **config: Any) -> Any:
        path = self.root / f"agent_{agent_id:04d}"
        cls.create(path, agent_id=agent_id, profile={"name": f"P{agent_id}"}, config=config)
        agent = await cls.from_workspace(path, self.services)
        agent._dispatcher = MeteredModel(ScriptedModel(replies), agent.meter, caller=f"agent:{agent_id}")
        return agent

    def pending(self) -> list[tuple[int, int, str]]:
        return [(p["sender"], p["recipient"], p["content"]) for p in self.space.updates.all()]


async def test_person_agents_share_generated_code_each_with_its_own_values(tmp_path: Path) -> None:
    world = World(tmp_path, [SEND_CODE])
    first = await world.agent(PersonAgent, 1, [ask("send a message to agent 2 saying 'lunch?'")])
    second = await world.agent(PersonAgent, 3, [ask("send a message to agent 4 saying 'tea at five?'")])

    assert (await first.step(900, T1)).status == "finished"
    assert (await second.step(900, T1)).status == "finished"

    assert len(world.coder.requests) == 1  # the second agent's ask was a cache hit
    prompt = world.coder.requests[0]["messages"][1]["content"]
    assert "send a message to agent {agent} saying '{text}'" in prompt and '"agent": 2' in prompt
    assert world.pending() == [(1, 2, "lunch?"), (3, 4, "tea at five?")]
    stats = world.router.get_cache_stats()
    assert (stats.misses, stats.hits_exact, stats.generations) == (1, 1, 1)


async def test_the_models_variables_travel_with_its_template(tmp_path: Path) -> None:
    world = World(tmp_path, [SEND_CODE])
    agent = await world.agent(PersonAgent, 1, [ask("message agent {agent}: {text}", {"agent": 6, "text": "hi", "x": 1})])
    await agent.step(900, T1)
    assert world.pending() == [(1, 6, "hi")]
    assert "message agent {agent}: {text}" in world.coder.requests[0]["messages"][1]["content"]


async def test_a_placeholder_without_a_value_is_not_sent_and_the_model_is_told(tmp_path: Path) -> None:
    world = World(tmp_path, [])
    agent = await world.agent(PersonAgent, 1, [ask("send {text} to agent 2")])

    await agent.step(900, T1)

    assert world.coder.requests == []
    [log] = agent._tool_log
    assert log["result"].startswith("[fail] not sent: no value for {text}")


async def test_env_template_mode_false_sends_plain_text_and_skips_the_cache(tmp_path: Path) -> None:
    world = World(tmp_path, ["send_message(to_agent_id=2, content='lunch?')", "send_message(to_agent_id=4, content='tea?')"])
    first = await world.agent(PersonAgent, 1, [ask("send a message to agent 2 saying 'lunch?'")], env_template_mode=False)
    second = await world.agent(PersonAgent, 3, [ask("send a message to agent 4 saying 'tea?'")], env_template_mode=False)
    await first.step(900, T1)
    await second.step(900, T1)

    assert len(world.coder.requests) == 2
    assert "Instruction from agent 1: send a message to agent 2 saying 'lunch?'" in world.coder.requests[0]["messages"][1]["content"]
    assert world.router.get_cache_stats().requests == 0
    assert world.pending() == [(1, 2, "lunch?"), (3, 4, "tea?")]


async def test_a_rule_based_agent_sends_its_configured_template_with_the_values(tmp_path: Path) -> None:
    world = World(tmp_path, ['post_to_group(group="game", content=variables["move"])'])
    world.space.bind_agents([1, 2])
    agents = [await world.agent(RuleBasedAgent, i, [], rule={"rule": rule}) for i, rule in ((1, "always_cooperate"), (2, "always_defect"))]
    for agent in agents:
        assert (await agent.step(3600, T1)).status == "finished"

    assert len(world.coder.requests) == 1
    assert "play {move} in round {round}" in world.coder.requests[0]["messages"][1]["content"]
    assert world.pending() == [(1, None, "cooperate"), (2, None, "defect")]
