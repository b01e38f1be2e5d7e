"""Contrib agents: the game players step with scripted LLM replies; the rule-based baseline needs no LLM."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.agent.base import AgentBase
from engine.agent.contrib import PrisonersDilemmaAgent, PublicGoodsAgent, RuleBasedAgent, TrustGameAgent
from engine.agent.contrib.rule_based import RuleConfig, announced_moves, decide
from engine.agent.registry import resolve_agent
from engine.agent.service_proxy import ServiceProxy
from engine.env.modules.messaging import MessagingSpace
from engine.env.routers.react import ReActRouter
from engine.errors import SpecError
from engine.llm.backends.scripted import ScriptedModel
from engine.llm.client import LLMClient
from engine.llm.meter import MeteredModel

T0 = datetime(2024, 1, 1, 9, 0)


def move(tool: str, arguments: dict[str, Any], *, done: bool = False) -> dict[str, Any]:
    return {"thought": "my move", "action": {"tool": tool, "arguments": arguments}, "finish": done}


def finish(summary: str) -> dict[str, Any]:
    return {"thought": "done", "action": {"tool": "finish", "arguments": {"summary": summary}}, "finish": True}


def router_says(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"thought": "route", "action": {"tool": tool, "arguments": arguments}, "done": True}


def offered(request: dict[str, Any]) -> set[str]:
    return set(request["response_format"]["json_schema"]["schema"]["properties"]["action"]["discriminator"]["mapping"])


class World:
    """A MessagingSpace behind an in-process ReActRouter whose LLM is scripted."""

    def __init__(self, root: Path, router_replies: list[Any] | None = None) -> None:
        self.root = root
        self.space = MessagingSpace()
        self.router_llm = ScriptedModel(router_replies or [])
        self.router = ReActRouter([self.space], self.router_llm)
        self.services = ServiceProxy(env=self.router, llm={"default": LLMClient(model="sim/default:test")})

    async def agent(self, cls: type[AgentBase], agent_id: int, replies: list[Any], **config: Any) -> tuple[Any, ScriptedModel]:
        path = self.root / f"agent_{agent_id:04d}"
        if not path.exists():
            cls.create(path, agent_id=agent_id, profile={"name": f"P{agent_id}"}, config=config)
        agent = await cls.from_workspace(path, self.services)
        llm = ScriptedModel(replies)
        agent._dispatcher = MeteredModel(llm, agent.meter, caller=f"agent:{agent_id}")
        return agent, llm

    def instructions(self) -> list[str]:
        return [r["messages"][1]["content"].split("Instruction from agent ")[1].split("\n")[0] for r in self.router_llm.requests]


@pytest.fixture
def world(tmp_path: Path) -> World:
    return World(tmp_path, [router_says("send_message", {"to_agent_id": 2, "content": "I cooperate"})] * 4)


# ---- the game players -----------------------------------------------------------------------------
async def test_prisoners_dilemma_agent_plays_through_ask_env_and_finishes(world: World) -> None:
    agent, llm = await world.agent(PrisonersDilemmaAgent, 1, [move("play", {"move": "cooperate"}), finish("cooperated")],
                                   game={"opponent": 2})

    outcome = await agent.step(3600, T0)

    assert (outcome.status, outcome.summary, outcome.tools_called) == ("finished", "cooperated", ["play", "finish"])
    assert outcome.env_calls == 2  # the observation and the move
    assert world.instructions() == ["1: play cooperate in round 1 of the prisoner's dilemma against agent 2"]
    assert {"play", "ask_env", "finish"} <= offered(llm.requests[0])
    system, user = (m["content"] for m in llm.requests[0]["messages"][:2])
    assert "repeated prisoner's dilemma" in system and "Both cooperate: 3 points each" in system and "agent 2" in system
    assert user.startswith("Round 1 begins.") and "Your inbox is empty." in user
    assert agent.meter.records[0].prompt_name == "game.prisoners_dilemma.system"
    assert agent.state["moves"] == [{"round": 1, "move": "cooperate", "accepted": True,
                                     "env": "[success] send_message: message to agent 2 queued for delivery"}]
    await world.router.step(3600, T0)
    assert "from agent 1: I cooperate" in await world.router.observe(2)


async def test_the_move_history_crosses_ticks_through_the_workspace(world: World) -> None:
    agent, _ = await world.agent(PrisonersDilemmaAgent, 1, [move("play", {"move": "cooperate"}, done=True)])
    await agent.step(3600, T0)
    agent.commit_step(1, {})
    await agent.to_workspace()

    again, llm = await world.agent(PrisonersDilemmaAgent, 1, [move("play", {"move": "defect"}, done=True)])
    outcome = await again.step(3600, T0 + timedelta(hours=1))

    assert outcome.status == "finished"
    assert "round 1: cooperate" in llm.requests[0]["messages"][0]["content"]
    assert "Round 2 begins." in llm.requests[0]["messages"][-1]["content"]  # after the earlier turns
    assert [m["move"] for m in again.state["moves"]] == ["cooperate", "defect"]
    assert world.instructions()[-1] == "1: play defect in round 2 of the prisoner's dilemma"


async def test_a_second_move_in_the_same_round_is_refused(world: World) -> None:
    agent, llm = await world.agent(PrisonersDilemmaAgent, 1, [
        move("play", {"move": "cooperate"}), move("play", {"move": "defect"}), finish("done")])

    outcome = await agent.step(3600, T0)

    assert outcome.tools_called == ["play", "play", "finish"]
    assert outcome.env_calls == 2
    assert llm.requests[2]["messages"][-1]["content"] == "Result of play: error: you already moved in round 1; finish the step"
    assert len(world.router_llm.requests) == 1
    assert [m["move"] for m in agent.state["moves"]] == ["cooperate"]


async def test_public_goods_agent_contributes_within_its_endowment(world: World) -> None:
    agent, llm = await world.agent(PublicGoodsAgent, 1, [
        move("contribute", {"amount": 12}), move("contribute", {"amount": 4}, done=True)], game={"endowment": 8})

    outcome = await agent.step(3600, T0)

    assert outcome.status == "finished" and outcome.tools_called == ["contribute"]
    schema = str(llm.requests[0]["response_format"]["json_schema"]["schema"])
    assert "'maximum': 8" in schema
    assert llm.requests[1]["messages"][-1]["content"].startswith("Your previous answer was not valid.")  # 12 > 8
    assert world.instructions() == ["1: contribute 4 of my 8 tokens to the public pool in round 1 of the public goods game"]
    assert "receives 8 tokens" in llm.requests[0]["messages"][0]["content"]
    assert agent.meter.records[0].prompt_name == "game.public_goods.system"
    assert agent.state["moves"][0]["move"] == "contribute 4"


@pytest.mark.parametrize(("role", "tool", "instruction"), [
    ("investor", "invest", "1: send 6 tokens to agent 2 in round 1 of the trust game"),
    ("trustee", "return_tokens", "1: return 6 tokens to agent 2 in round 1 of the trust game"),
])
async def test_trust_game_agent_moves_by_role(world: World, role: str, tool: str, instruction: str) -> None:
    agent, llm = await world.agent(TrustGameAgent, 1, [move(tool, {"amount": 6}), finish("moved")],
                                   game={"role": role, "partner": 2})

    outcome = await agent.step(3600, T0)

    assert outcome.status == "finished" and outcome.tools_called == [tool, "finish"]
    assert {tool, "ask_env", "finish"} <= offered(llm.requests[0])
    assert world.instructions() == [instruction]
    assert f"You are the {role}" in llm.requests[0]["messages"][0]["content"]
    assert agent.meter.records[0].prompt_name == "game.trust.system"


async def test_a_readonly_ask_offers_no_move_and_changes_nothing(world: World) -> None:
    agent, llm = await world.agent(PrisonersDilemmaAgent, 1, [finish("I would cooperate first.")])

    answer = await agent.ask("What will you play?", t=T0)

    assert answer == "I would cooperate first."
    assert {"ask_env", "finish"} <= offered(llm.requests[0]) and "play" not in offered(llm.requests[0])
    assert "Someone asks you: What will you play?" in llm.requests[0]["messages"][1]["content"]
    assert "moves" not in agent.state and world.router_llm.requests == []


async def test_an_invalid_game_config_is_a_spec_error(world: World) -> None:
    with pytest.raises(SpecError, match="config.game"):
        await world.agent(PublicGoodsAgent, 1, [], game={"endowment": 0})
    with pytest.raises(SpecError, match="config.game"):
        await world.agent(TrustGameAgent, 2, [], game={"role": "banker"})


# ---- the rule-based baseline ----------------------------------------------------------------------
def direct(rule: str, opponent: int) -> dict[str, Any]:
    return {"rule": rule, "opponent": opponent, "tool": "send_message",
            "arguments": {"to_agent_id": opponent, "content": "I {label} in round {round}"}}


async def play_rounds(world: World, rules: dict[int, dict[str, Any]], rounds: int) -> dict[int, list[str]]:
    """Step every rule agent ``rounds`` times through the real router; returns each one's moves."""
    for step in range(1, rounds + 1):
        t = T0 + timedelta(hours=step)
        for agent_id, rule in rules.items():
            agent, llm = await world.agent(RuleBasedAgent, agent_id, [], rule=rule)
            outcome = await agent.step(3600, t)
            assert outcome.status == "finished" and outcome.turns == 0
            assert agent.meter.calls == 0 and llm.requests == []
            agent.commit_step(step, {})
            await agent.to_workspace()
        await world.router.step(3600, t)
    moves = {}
    for agent_id in rules:
        agent, _ = await world.agent(RuleBasedAgent, agent_id, [], rule=rules[agent_id])
        moves[agent_id] = [m["move"] for m in agent.state["moves"]]
    return moves


async def test_rule_based_tit_for_tat_against_a_defector_without_any_llm_call(tmp_path: Path) -> None:
    world = World(tmp_path)

    moves = await play_rounds(world, {1: direct("tit_for_tat", 2), 2: direct("always_defect", 1)}, rounds=3)

    assert moves == {1: ["cooperate", "defect", "defect"], 2: ["defect", "defect", "defect"]}
    assert world.router_llm.requests == []  # the direct tool path: no router LLM either
    assert "from agent 1: I defect in round 3" in await world.router.observe(2)


async def test_rule_based_agents_are_deterministic(tmp_path: Path) -> None:
    rules = {1: direct("grim_trigger", 2), 2: direct("tit_for_tat", 1), 3: {**direct("threshold", 1), "opponent": None}}
    first = await play_rounds(World(tmp_path / "a"), rules, rounds=4)
    second = await play_rounds(World(tmp_path / "b"), rules, rounds=4)
    assert first == second
    assert first[1] == first[2] == ["cooperate"] * 4


async def test_rule_based_step_outcome_and_the_ask_env_fallback(tmp_path: Path) -> None:
    world = World(tmp_path, [router_says("post_to_group", {"group": "game", "content": "cooperate"})])
    agent, llm = await world.agent(RuleBasedAgent, 1, [], rule={"rule": "tit_for_tat"})

    outcome = await agent.step(3600, T0)

    assert outcome.status == "finished"
    assert outcome.summary == "played cooperate in round 1: tit_for_tat nothing announced yet, so it opens"
    assert (outcome.tools_called, outcome.env_calls, outcome.turns) == (["ask_env"], 2, 0)
    assert world.instructions() == ["1: play cooperate in round 1"]
    assert agent.meter.calls == 0 and llm.requests == []
    assert await agent.ask("What do you do?") == "I am a rule-based agent following tit_for_tat; my last move was cooperate in round 1."


async def test_a_refused_direct_call_is_an_error_outcome_not_a_finish(tmp_path: Path) -> None:
    world = World(tmp_path)
    world.space.bind_agents([1, 2])
    agent, _ = await world.agent(RuleBasedAgent, 1, [], rule=direct("always_cooperate", 9))

    outcome = await agent.step(3600, T0)

    assert outcome.status == "error" and outcome.summary is None
    assert "there is no agent 9" in (outcome.error or "")
    assert agent.state["moves"][0]["accepted"] is False


def test_announced_moves_reads_the_last_move_word_per_line_and_filters_the_opponent() -> None:
    inbox = ("Inbox (3 messages, latest 3):\n- from agent 2: I cooperated last time\n"
             "- from agent 3: defect!\n- from agent 2: cooperate, no wait: DEFECT")
    assert announced_moves(inbox) == ["cooperate", "defect", "defect"]
    assert announced_moves(inbox, opponent=2) == ["cooperate", "defect"]
    assert announced_moves(inbox, opponent=22) == []
    assert announced_moves("Your inbox is empty.") == []


@pytest.mark.parametrize(("rule", "seen", "triggered", "expected"), [
    ("tit_for_tat", [], False, "cooperate"),
    ("tit_for_tat", ["defect", "cooperate"], False, "cooperate"),
    ("grim_trigger", ["cooperate"], True, "defect"),
    ("grim_trigger", ["defect", "cooperate"], False, "defect"),
    ("threshold", ["cooperate", "defect"], False, "cooperate"),
    ("threshold", ["cooperate", "defect", "defect"], False, "defect"),
    ("always_defect", ["cooperate"], False, "defect"),
])
def test_decide_applies_each_rule(rule: str, seen: list[Any], triggered: bool, expected: str) -> None:
    assert decide(RuleConfig(rule=rule), seen, triggered=triggered)[0] == expected  # type: ignore[arg-type]


def test_all_four_are_registered_by_name() -> None:
    for cls in (PrisonersDilemmaAgent, PublicGoodsAgent, TrustGameAgent, RuleBasedAgent):
        assert resolve_agent(cls.__name__) is cls
