"""The game modules: one move per round, payoffs at the env step, replay, state, and the contrib agents playing them."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.agent.base import AgentBase
from engine.agent.contrib import PrisonersDilemmaAgent, PublicGoodsAgent, RuleBasedAgent, TrustGameAgent
from engine.agent.contrib.rule_based import announced_moves
from engine.agent.service_proxy import ServiceProxy
from engine.env.base import EnvBase
from engine.env.modules.games import PrisonersDilemmaGame, PublicGoodsGame, TrustGame
from engine.env.routers.react import ReActRouter
from engine.errors import SpecError, ToolCallError
from engine.llm.backends.scripted import ScriptedModel
from engine.llm.client import LLMClient
from engine.llm.meter import MeteredModel

T0 = datetime(2024, 1, 1, 9, 0)


async def call(game: EnvBase, name: str, **arguments: Any) -> Any:
    return await game.call_tool(name, arguments)


async def end_round(game: EnvBase, n: int = 1) -> None:
    for _ in range(n):
        await game.step(3600, (game.t or T0) + timedelta(hours=1))


def rows(game: EnvBase, dataset: str) -> list[dict[str, Any]]:
    return game.replay_rows(1, T0)[dataset]


# ---- prisoner's dilemma ---------------------------------------------------------------------------
@pytest.mark.parametrize(("mine", "theirs", "payoffs"), [
    ("cooperate", "cooperate", (3, 3)), ("cooperate", "defect", (0, 5)),
    ("defect", "cooperate", (5, 0)), ("defect", "defect", (1, 1)),
])
async def test_prisoners_dilemma_pays_by_the_default_matrix(mine: str, theirs: str, payoffs: tuple[int, int]) -> None:
    game = PrisonersDilemmaGame(pairs=[[1, 2]])
    assert await call(game, "play", agent_id=1, move=mine) == (
        f"you play {mine} against agent 2 in round 1: the result comes at the end of the round")
    await call(game, "play", agent_id=2, move=theirs)
    await end_round(game)
    assert [(r["agent_id"], r["move"], r["partner_move"], r["payoff"]) for r in rows(game, "prisoners_dilemma_moves")] == [
        (1, mine, theirs, payoffs[0]), (2, theirs, mine, payoffs[1])]


async def test_prisoners_dilemma_matrix_comes_from_the_kwargs() -> None:
    game = PrisonersDilemmaGame(temptation=10, reward=6, punishment=2, sucker=-1, pairs=[[1, 2]])
    await call(game, "play", agent_id=1, move="defect")
    await call(game, "play", agent_id=2, move="cooperate")
    await end_round(game)
    assert [r["payoff"] for r in rows(game, "prisoners_dilemma_moves")] == [10, -1]


async def test_nothing_is_resolved_before_the_step_and_a_second_move_is_refused() -> None:
    game = PrisonersDilemmaGame(pairs=[[1, 2]])
    await call(game, "play", agent_id=1, move="cooperate")
    with pytest.raises(ToolCallError, match="you already moved in round 1 of the prisoner's dilemma; one move per round"):
        await call(game, "play", agent_id=1, move="defect")
    status = await call(game, "prisoners_dilemma_status", agent_id=2)
    assert status == ("Prisoner's dilemma, round 1: your opponent is agent 1.\nYou have not moved yet this round.\n"
                      "Your total so far: 0 points.")
    assert "Your move for this round is in." in await call(game, "prisoners_dilemma_status", agent_id=1)
    await end_round(game)
    assert await call(game, "play", agent_id=1, move="defect", round=2)  # a new round opens at the step


@pytest.mark.parametrize(("arguments", "message"), [
    ({"agent_id": 3, "move": "cooperate"}, "agent 3 is not a player in this prisoner's dilemma"),
    ({"agent_id": 1, "move": "cooperate", "round": 2}, "round 1 of the prisoner's dilemma is open, not round 2"),
    ({"agent_id": 1, "move": "betray"}, "bad arguments for PrisonersDilemmaGame.play: Input should be 'cooperate' or 'defect'"),
])
async def test_prisoners_dilemma_refusals_are_clear(arguments: dict[str, Any], message: str) -> None:
    game = PrisonersDilemmaGame(pairs=[[1, 2]])
    with pytest.raises(ToolCallError, match=message):
        await game.call_tool("play", arguments)
    assert game.dump_state()["moves"] == {}


async def test_a_round_without_both_moves_is_void_and_recorded_as_missing() -> None:
    game = PrisonersDilemmaGame(pairs=[[1, 2]])
    await call(game, "play", agent_id=2, move="defect")
    await end_round(game)
    assert [(r["moved"], r["move"], r["payoff"], r["total"]) for r in rows(game, "prisoners_dilemma_moves")] == [
        (False, None, None, 0.0), (True, "defect", None, 0.0)]
    assert (await call(game, "prisoners_dilemma_status", agent_id=1)).endswith(
        "- round 1: you made no move; from agent 2: defect; the round was void (no points)")
    assert (await call(game, "prisoners_dilemma_status", agent_id=2)).endswith(
        "- round 1: agent 1 made no move, so the round was void (no points)")


async def test_pairs_come_from_the_bound_agents_in_id_order_and_fixed_pairs_are_checked() -> None:
    game = PrisonersDilemmaGame()
    game.bind_agents([5, 3, 1, 4, 2])
    assert game.groups() == [[1, 2], [3, 4]]
    assert await call(game, "prisoners_dilemma_status", agent_id=5) == "You are not a player in this prisoner's dilemma."
    with pytest.raises(SpecError, match="players must be in pairs of two"):
        PrisonersDilemmaGame(pairs=[[1, 2], [2, 3]])
    with pytest.raises(SpecError, match=r"the players \[9\] are not agents of this run"):
        PrisonersDilemmaGame(pairs=[[1, 9]]).bind_agents([1, 2])


async def test_the_status_shows_past_rounds_as_rule_based_agents_read_them() -> None:
    game = PrisonersDilemmaGame(pairs=[[1, 2]])
    for mine, theirs in [("cooperate", "defect"), ("defect", "defect"), ("defect", "cooperate")]:
        await call(game, "play", agent_id=1, move=mine)
        await call(game, "play", agent_id=2, move=theirs)
        await end_round(game)
    status = await call(game, "prisoners_dilemma_status", agent_id=1)
    assert status.splitlines()[-4:] == [
        "Past rounds (latest last):",
        "- round 1: you cooperate; from agent 2: defect; points: you 0, agent 2 5",
        "- round 2: you defect; from agent 2: defect; points: you 1, agent 2 1",
        "- round 3: you defect; from agent 2: cooperate; points: you 5, agent 2 0",
    ]
    assert "Your total so far: 6 points." in status
    # Only the opponent's moves count, whether or not the reader filters by opponent.
    assert announced_moves(status) == announced_moves(status, opponent=2) == ["defect", "defect", "cooperate"]
    assert await call(game, "prisoners_dilemma_statistics") == (
        "3 rounds resolved; cooperation rate 33% overall, 50% last round; mean payoff per player per round 2.00")


async def test_the_history_shown_is_limited() -> None:
    game = PrisonersDilemmaGame(pairs=[[1, 2]], history_limit=2)
    await end_round(game, 3)
    status = await call(game, "prisoners_dilemma_status", agent_id=1)
    assert status.splitlines()[-2:] == ["- round 2: neither of you moved (no points)", "- round 3: neither of you moved (no points)"]


# ---- public goods ---------------------------------------------------------------------------------
async def test_public_goods_shares_the_multiplied_pool_with_every_member() -> None:
    game = PublicGoodsGame(groups=[[1, 2, 3, 4]])
    for agent_id, amount in [(1, 10), (2, 10), (3, 0)]:
        await call(game, "contribute", agent_id=agent_id, amount=amount)
    await end_round(game)
    got = {r["agent_id"]: (r["contribution"], r["payoff"]) for r in rows(game, "public_goods_contributions")}
    # pool 20 x 1.6 = 32, 8 each; agent 4 made no move and kept its endowment.
    assert got == {1: (10, 8), 2: (10, 8), 3: (0, 18), 4: (None, 18)}
    summary = {k: v for k, v in rows(game, "public_goods_rounds")[0].items() if k != "t"}
    assert summary == pytest.approx({
        "step": 1, "round": 1, "players": 4, "moves": 3, "mean_contribution": 20 / 3,
        "contribution_rate": 2 / 3, "mean_payoff": 13.0})
    assert (await call(game, "public_goods_status", agent_id=3)).endswith(
        "- round 1: you contributed 0; agent 1: 10, agent 2: 10, agent 4: no move; pool 20 x 1.6 shared by 4: 8 each; you got 18")
    assert await call(game, "public_goods_statistics") == (
        "1 rounds resolved; mean contribution 6.67 tokens (67% of the endowment) overall, 6.67 last round; "
        "mean payoff per player per round 13.00")


async def test_public_goods_groups_from_bound_agents_absorb_a_single_leftover() -> None:
    game = PublicGoodsGame(group_size=2)
    game.bind_agents([1, 2, 3, 4, 5])
    assert game.groups() == [[1, 2], [3, 4, 5]]
    game = PublicGoodsGame(group_size=3)
    game.bind_agents([1, 2, 3, 4, 5])
    assert game.groups() == [[1, 2, 3], [4, 5]]


@pytest.mark.parametrize(("amount", "message"), [(11, "you can contribute 0 to 10 tokens, not 11"), (-1, "not -1")])
async def test_a_contribution_outside_the_endowment_is_refused(amount: int, message: str) -> None:
    game = PublicGoodsGame(groups=[[1, 2]])
    with pytest.raises(ToolCallError, match=message):
        await call(game, "contribute", agent_id=1, amount=amount)
    assert await call(game, "contribute", agent_id=1, amount=10)


# ---- trust game -----------------------------------------------------------------------------------
async def test_trust_game_returns_come_a_round_after_the_investment() -> None:
    game = TrustGame(pairs=[[1, 2]])
    assert await call(game, "invest", agent_id=1, amount=6) == (
        "you send 6 tokens (the trustee receives 18) in round 1: the result comes at the end of the round")
    with pytest.raises(ToolCallError, match="you have nothing to return yet"):
        await call(game, "return_tokens", agent_id=2, amount=1)
    await call(game, "return_tokens", agent_id=2, amount=0)
    await end_round(game)
    assert "This round you can return 0 to 18 tokens." in await call(game, "trust_game_status", agent_id=2)
    with pytest.raises(ToolCallError, match=r"you can return 0 to 18 tokens \(what you received last round\), not 19"):
        await call(game, "return_tokens", agent_id=2, amount=19)
    await call(game, "invest", agent_id=1, amount=4)
    await call(game, "return_tokens", agent_id=2, amount=8)
    await end_round(game)

    moves = game.replay_rows(2, T0)["trust_game_moves"]
    assert [(r["role"], r["amount"], r["received"], r["returnable"], r["payoff"], r["total"]) for r in moves] == [
        ("investor", 4, 8.0, None, 14, 18), ("trustee", 8, 12.0, 18.0, 4.0, 22.0)]
    assert (await call(game, "trust_game_status", agent_id=1)).endswith(
        "- round 1: you sent 6 (agent 2 received 18); agent 2 returned 0; you got 4\n"
        "- round 2: you sent 4 (agent 2 received 12); agent 2 returned 8; you got 14")
    assert (await call(game, "trust_game_status", agent_id=2)).endswith(
        "- round 2: agent 1 sent 4 and you received 12; you returned 8 of the 18 you could; you got 4")
    assert await call(game, "trust_game_statistics") == (
        "2 rounds resolved; investors sent 50% of their endowment (trust ratio); trustees returned 44% of what they could "
        "return (return ratio); mean payoff per player per round 10.00")


@pytest.mark.parametrize(("tool", "agent_id", "amount", "message"), [
    ("invest", 2, 1, "agent 2 is the trustee in this trust game and moves with return_tokens"),
    ("return_tokens", 1, 0, "agent 1 is the investor in this trust game and moves with invest"),
    ("invest", 1, 11, "you can send 0 to 10 tokens, not 11"),
    ("invest", 3, 1, "agent 3 is not a player in this trust game"),
])
async def test_trust_game_refusals_are_clear(tool: str, agent_id: int, amount: int, message: str) -> None:
    game = TrustGame(pairs=[[1, 2]])
    with pytest.raises(ToolCallError, match=message):
        await call(game, tool, agent_id=agent_id, amount=amount)
    assert game.dump_state()["moves"] == {}


async def test_trust_game_pairs_the_bound_agents_lower_id_investing() -> None:
    game = TrustGame()
    game.bind_agents([4, 3])
    assert "you are the investor and agent 4 is the trustee" in await call(game, "trust_game_status", agent_id=3)


# ---- every game: order independence, replay, persistence -----------------------------------------
MOVES: dict[str, tuple[Any, list[tuple[str, int, dict[str, Any]]]]] = {
    "pd": (lambda: PrisonersDilemmaGame(pairs=[[1, 2], [3, 4]]),
           [("play", 4, {"move": "defect"}), ("play", 1, {"move": "cooperate"}), ("play", 3, {"move": "cooperate"}),
            ("play", 2, {"move": "defect"})]),
    "pg": (lambda: PublicGoodsGame(groups=[[1, 2, 3], [4, 5]]),
           [("contribute", 5, {"amount": 3}), ("contribute", 1, {"amount": 7}), ("contribute", 4, {"amount": 0}),
            ("contribute", 2, {"amount": 10})]),
    "trust": (lambda: TrustGame(pairs=[[1, 2], [3, 4]]),
              [("invest", 3, {"amount": 2}), ("return_tokens", 2, {"amount": 0}), ("invest", 1, {"amount": 9})]),
}


@pytest.mark.parametrize("name", sorted(MOVES))
async def test_a_rounds_outcome_does_not_depend_on_the_order_of_the_moves(name: str) -> None:
    make, moves = MOVES[name]
    outcomes = []
    for order in (moves, moves[::-1]):
        game = make()
        for tool, agent_id, arguments in order:
            await call(game, tool, agent_id=agent_id, **arguments)
        await end_round(game)
        state = game.dump_state()
        outcomes.append((state["last"], state["totals"], game.replay_rows(1, T0)))
    assert outcomes[0] == outcomes[1]


@pytest.mark.parametrize("name", sorted(MOVES))
async def test_replay_rows_per_round_fit_the_declared_datasets(name: str) -> None:
    make, moves = MOVES[name]
    game = make()
    schemas = game.replay_datasets()
    assert [s.name.split("_")[0] for s in schemas] == [schemas[0].name.split("_")[0]] * 2  # one prefix per game
    assert game.replay_rows(0, T0) == {s.name: [] for s in schemas}  # nothing resolved yet
    for round_ in (1, 2):
        for tool, agent_id, arguments in moves:
            await call(game, tool, agent_id=agent_id, **arguments)
        await end_round(game)
        produced = game.replay_rows(round_, T0)
        for schema in schemas:
            table = schema.to_table(produced[schema.name])
            assert table.column_names == [c.name for c in schema.columns]
            assert set(table.column("round").to_pylist()) == {round_}
        assert len(produced[schemas[1].name]) == 1


def test_dataset_names_are_unique_across_the_game_modules() -> None:
    names = [s.name for cls in (PrisonersDilemmaGame, PublicGoodsGame, TrustGame) for s in cls.replay_datasets()]
    assert len(names) == len(set(names)) == 6


@pytest.mark.parametrize("name", sorted(MOVES))
async def test_state_survives_to_workspace_and_from_workspace_mid_round(name: str, tmp_path: Path) -> None:
    make, moves = MOVES[name]
    game = make()
    game.bind_workspace(tmp_path)
    for tool, agent_id, arguments in moves:
        await call(game, tool, agent_id=agent_id, **arguments)
    await end_round(game)
    tool, agent_id, arguments = moves[0]
    await call(game, tool, agent_id=agent_id, **arguments)  # pending in round 2 when saved
    await game.to_workspace()

    fresh = await type(game).from_workspace(tmp_path, **{"pairs" if name != "pg" else "groups": game.groups()})
    assert fresh.dump_state() == game.dump_state()
    with pytest.raises(ToolCallError, match="you already moved in round 2"):
        await call(fresh, tool, agent_id=agent_id, **arguments)
    for module in (game, fresh):
        for tool, agent_id, arguments in moves[1:]:
            await call(module, tool, agent_id=agent_id, **arguments)
        await end_round(module)
    assert fresh.dump_state() == game.dump_state()
    assert fresh.replay_rows(2, T0) == game.replay_rows(2, T0)


# ---- end to end: the contrib agents play the modules ----------------------------------------------
def router_says(tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"thought": "route", "action": {"tool": tool, "arguments": arguments}, "done": True}


def agent_plays(tool: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"thought": "my move", "action": {"tool": tool, "arguments": arguments}, "finish": False},
            {"thought": "done", "action": {"tool": "finish", "arguments": {"summary": "moved"}}, "finish": True}]


class Table:
    """A game module behind an in-process ReActRouter whose LLM is scripted; agents live in workspaces."""

    def __init__(self, root: Path, game: EnvBase, router_replies: list[Any], agent_ids: list[int]) -> None:
        self.root, self.game, self.agent_ids = root, game, agent_ids
        self.router_llm = ScriptedModel(router_replies)
        self.router = ReActRouter([game], self.router_llm)
        self.services = ServiceProxy(env=self.router, llm={"default": LLMClient(model="sim/default:test")})
        self.agent_llms: list[ScriptedModel] = []

    async def start(self) -> Table:
        await self.router.init(T0, agent_ids=self.agent_ids)
        return self

    async def play_round(self, step: int, cls: type[AgentBase], config: dict[int, dict[str, Any]],
                         replies: dict[int, list[Any]] | None = None) -> dict[int, Any]:
        """Every agent steps once (as in a society step), then the env step resolves the round."""
        t = T0 + timedelta(hours=step)
        outcomes = {}
        for agent_id in self.agent_ids:
            path = self.root / f"agent_{agent_id:04d}"
            if not path.exists():
                cls.create(path, agent_id=agent_id, profile={"name": f"P{agent_id}"}, config=config[agent_id])
            agent = await cls.from_workspace(path, self.services)
            llm = ScriptedModel((replies or {}).get(agent_id, []))
            self.agent_llms.append(llm)
            agent._dispatcher = MeteredModel(llm, agent.meter, caller=f"agent:{agent_id}")
            outcomes[agent_id] = await agent.step(3600, t)
            agent.commit_step(step, {})
            await agent.to_workspace()
        await self.router.step(3600, t)
        return outcomes

    def instructions(self) -> list[str]:
        return [r["messages"][1]["content"].split("Instruction from agent ")[1].split("\n")[0] for r in self.router_llm.requests]


async def test_prisoners_dilemma_agents_play_two_rounds_through_the_router(tmp_path: Path) -> None:
    table = await Table(tmp_path, PrisonersDilemmaGame(), [
        router_says("play", {"move": "cooperate", "round": 1}), router_says("play", {"move": "defect"}),
        router_says("play", {"move": "defect"}), router_says("play", {"move": "defect", "round": 2}),
    ], [1, 2]).start()
    config = {1: {"game": {"opponent": 2}}, 2: {"game": {"opponent": 1}}}

    first = await table.play_round(1, PrisonersDilemmaAgent, config, {1: agent_plays("play", {"move": "cooperate"}),
                                                                      2: agent_plays("play", {"move": "defect"})})
    second = await table.play_round(2, PrisonersDilemmaAgent, config, {1: agent_plays("play", {"move": "defect"}),
                                                                       2: agent_plays("play", {"move": "defect"})})

    assert all(o.status == "finished" for o in [*first.values(), *second.values()])
    assert table.instructions() == [
        "1: play cooperate in round 1 of the prisoner's dilemma against agent 2",
        "2: play defect in round 1 of the prisoner's dilemma against agent 1",
        "1: play defect in round 2 of the prisoner's dilemma against agent 2",
        "2: play defect in round 2 of the prisoner's dilemma against agent 1",
    ]
    # Round 2's observation showed agent 1 the result of round 1.
    round_two_prompt = table.agent_llms[2].requests[0]["messages"][-1]["content"]
    assert "- round 1: you cooperate; from agent 2: defect; points: you 0, agent 2 5" in round_two_prompt
    assert table.game.dump_state()["totals"] == {"1": 1, "2": 6}  # (0 + 1, 5 + 1)
    assert [(r["agent_id"], r["move"], r["payoff"]) for r in table.game.replay_rows(2, T0)["prisoners_dilemma_moves"]] == [
        (1, "defect", 1), (2, "defect", 1)]


async def test_rule_based_agents_play_two_rounds_by_direct_tool_calls_without_any_llm(tmp_path: Path) -> None:
    table = await Table(tmp_path, PrisonersDilemmaGame(), [], [1, 2]).start()
    rules = {
        1: {"rule": {"rule": "tit_for_tat", "opponent": 2, "tool": "play", "arguments": {"move": "{move}", "round": "{round}"}}},
        2: {"rule": {"rule": "always_defect", "tool": "play", "arguments": {"move": "{move}"}}},
    }
    for step in (1, 2):
        outcomes = await table.play_round(step, RuleBasedAgent, rules)
        assert all(o.status == "finished" and o.tools_called == ["play"] for o in outcomes.values())

    assert table.router_llm.requests == [] and all(llm.requests == [] for llm in table.agent_llms)
    history = [(r["agent_id"], r["move"], r["payoff"]) for r in table.game.dump_state()["history"]["1"]]
    assert history == [(1, "cooperate", 0), (1, "defect", 1)]  # tit for tat answered the defection
    assert table.game.dump_state()["totals"] == {"1": 1, "2": 6}


async def test_a_rule_based_reader_without_an_opponent_counts_only_the_others_moves(tmp_path: Path) -> None:
    table = await Table(tmp_path, PrisonersDilemmaGame(), [], [1, 2]).start()
    rules = {
        1: {"rule": {"rule": "always_defect", "tool": "play", "arguments": {"move": "{move}"}}},
        # With its own cooperation counted it would see 50% and keep cooperating.
        2: {"rule": {"rule": "threshold", "threshold": 0.5, "tool": "play", "arguments": {"move": "{move}"}}},
    }
    for step in (1, 2):
        await table.play_round(step, RuleBasedAgent, rules)
    assert [r["move"] for r in table.game.dump_state()["history"]["2"]] == ["cooperate", "defect"]


async def test_a_refused_direct_move_is_an_error_outcome(tmp_path: Path) -> None:
    table = await Table(tmp_path, PrisonersDilemmaGame(pairs=[[1, 2]]), [], [1, 2, 3]).start()
    table.agent_ids = [3]
    outcomes = await table.play_round(1, RuleBasedAgent, {3: {"rule": {"tool": "play", "arguments": {"move": "{move}"}}}})
    assert outcomes[3].status == "error" and "agent 3 is not a player in this prisoner's dilemma" in (outcomes[3].error or "")


async def test_public_goods_agents_play_two_rounds_through_the_router(tmp_path: Path) -> None:
    table = await Table(tmp_path, PublicGoodsGame(group_size=2), [
        router_says("contribute", {"amount": 4}), router_says("contribute", {"amount": 10}),
        router_says("contribute", {"amount": 0}), router_says("contribute", {"amount": 10}),
    ], [1, 2]).start()
    config = {a: {"game": {"endowment": 10, "multiplier": 1.6, "group_size": 2}} for a in (1, 2)}

    await table.play_round(1, PublicGoodsAgent, config, {1: agent_plays("contribute", {"amount": 4}),
                                                         2: agent_plays("contribute", {"amount": 10})})
    await table.play_round(2, PublicGoodsAgent, config, {1: agent_plays("contribute", {"amount": 0}),
                                                         2: agent_plays("contribute", {"amount": 10})})

    assert table.instructions()[0] == "1: contribute 4 of my 10 tokens to the public pool in round 1 of the public goods game"
    state = table.game.dump_state()
    # Round 1: pool 14 x 1.6 / 2 = 11.2 each; round 2: pool 10 x 1.6 / 2 = 8 each.
    assert state["totals"] == pytest.approx({"1": (10 - 4 + 11.2) + (10 - 0 + 8), "2": (10 - 10 + 11.2) + (10 - 10 + 8)})
    assert "- round 1: you contributed 4; agent 2: 10; pool 14 x 1.6 shared by 2: 11.2 each; you got 17.2" in (
        table.agent_llms[2].requests[0]["messages"][-1]["content"])


async def test_trust_game_agents_play_two_rounds_through_the_router(tmp_path: Path) -> None:
    table = await Table(tmp_path, TrustGame(), [
        router_says("invest", {"amount": 6}), router_says("return_tokens", {"amount": 0}),
        router_says("invest", {"amount": 4}), router_says("return_tokens", {"amount": 8}),
    ], [1, 2]).start()
    config = {1: {"game": {"role": "investor", "partner": 2}}, 2: {"game": {"role": "trustee", "partner": 1}}}

    await table.play_round(1, TrustGameAgent, config, {1: agent_plays("invest", {"amount": 6}),
                                                       2: agent_plays("return_tokens", {"amount": 0})})
    await table.play_round(2, TrustGameAgent, config, {1: agent_plays("invest", {"amount": 4}),
                                                       2: agent_plays("return_tokens", {"amount": 8})})

    assert table.instructions() == [
        "1: send 6 tokens to agent 2 in round 1 of the trust game", "2: return 0 tokens to agent 1 in round 1 of the trust game",
        "1: send 4 tokens to agent 2 in round 2 of the trust game", "2: return 8 tokens to agent 1 in round 2 of the trust game",
    ]
    assert "This round you can return 0 to 18 tokens." in table.agent_llms[3].requests[0]["messages"][-1]["content"]
    # Investor: (10 - 6 + 0) + (10 - 4 + 8); trustee: (18 - 0) + (12 - 8).
    assert table.game.dump_state()["totals"] == {"1": 18, "2": 22.0}
