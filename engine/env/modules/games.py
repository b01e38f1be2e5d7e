"""Repeated games matching the contrib game agents: prisoner's dilemma, public goods, trust game.

One round per env step, resolved when the step runs (see :mod:`engine.env.modules.round_game`).
The move tools are the contrib agents' own: ``play(move)``, ``contribute(amount)``,
``invest(amount)`` and ``return_tokens(amount)``, each with an optional ``round`` that must be
the open one.
"""

from __future__ import annotations

from typing import Any, Literal

from engine.env.modules.round_game import RoundGame, fmt_or_na, mean_or_none, moves_schema, round_metrics, rounds_schema
from engine.env.tool import tool
from engine.errors import SpecError

__all__ = ["PrisonersDilemmaGame", "PublicGoodsGame", "TrustGame"]

_PD_MOVES = moves_schema(
    "prisoners_dilemma_moves", ("partner", "int64", "the opponent"), ("moved", "bool", "whether the player moved"),
    ("move", "string", "cooperate | defect (null: no move)"), ("partner_move", "string", "the opponent's move (null: no move)"))
_PD_ROUNDS = rounds_schema("prisoners_dilemma_rounds", ("cooperation_rate", "float64", "share of this round's moves that cooperated"))


class PrisonersDilemmaGame(RoundGame):
    """A repeated prisoner's dilemma: each round, paired agents cooperate or defect at the same time.

    An agent makes its move for the open round with ``play`` (cooperate or defect, once per round);
    payoffs follow the matrix when the round ends. ``prisoners_dilemma_status`` shows the agent's
    opponent, total and past rounds, one line per round ending with the opponent's move
    (``from agent N: defect``).

    Args:
        temptation: payoff for defecting against a cooperator.
        reward: payoff each when both cooperate.
        punishment: payoff each when both defect.
        sucker: payoff for cooperating against a defector.
        pairs: fixed ``[a, b]`` pairs; by default the bound agents in ascending id order (an odd one out sits out).
        history_limit: past rounds shown to each player.
    """

    game, unit = "prisoner's dilemma", "points"
    _moves_schema, _rounds_schema = _PD_MOVES, _PD_ROUNDS
    METRICS = round_metrics(_PD_ROUNDS)

    def __init__(self, temptation: float = 5, reward: float = 3, punishment: float = 1, sucker: float = 0,
                 pairs: list[list[int]] | None = None, history_limit: int = 10) -> None:
        super().__init__(pairs, history_limit)
        self.matrix = {("cooperate", "cooperate"): reward, ("cooperate", "defect"): sucker,
                       ("defect", "cooperate"): temptation, ("defect", "defect"): punishment}

    @tool(readonly=False)
    def play(self, agent_id: int, move: Literal["cooperate", "defect"], round: int | None = None) -> str:
        """Play cooperate or defect in the open round (once per round; round, if given, must be the open one)."""
        pair = self._open_move(agent_id, round)
        return f"you play {move} against agent {pair[1 - pair.index(agent_id)]} in " + self._record(agent_id, move)

    @tool(readonly=True, kind="observe")
    def prisoners_dilemma_status(self, agent_id: int) -> str:
        """agent_id's opponent, total points and past rounds with the opponent's moves."""
        return self._status(agent_id)

    @tool(readonly=True, kind="statistics")
    def prisoners_dilemma_statistics(self) -> str:
        """Rounds resolved, the share of cooperative moves overall and last round, and the mean payoff."""
        rate = self._agg.get("cooperate", 0) / self._agg["moves"] if self._agg.get("moves") else None
        last = self.summary(self._last)["cooperation_rate"] if self._last else None
        return (f"{self._round - 1} rounds resolved; cooperation rate {fmt_or_na(rate, '.0%')} overall, "
                f"{fmt_or_na(last, '.0%')} last round; {self._mean_payoff_text()}")

    def describe_match(self, agent_id: int, group: list[int]) -> str:
        return f"your opponent is agent {group[1 - group.index(agent_id)]}."

    def describe_round(self, row: dict[str, Any]) -> str:
        # RuleBasedAgent takes the last move word of each line (only lines "from agent N" when it
        # has an opponent): the opponent's move must be the last move word, and a line without
        # the opponent's move must name no move at all.
        r, other = f"- round {row['round']}: ", row["partner"]
        if row["move"] and row["partner_move"]:
            theirs = self.matrix[(row["partner_move"], row["move"])]
            return f"{r}you {row['move']}; from agent {other}: {row['partner_move']}; points: you {row['payoff']:g}, agent {other} {theirs:g}"
        if row["partner_move"]:
            return f"{r}you made no move; from agent {other}: {row['partner_move']}; the round was void (no points)"
        if row["move"]:
            return f"{r}agent {other} made no move, so the round was void (no points)"
        return f"{r}neither of you moved (no points)"

    def resolve(self) -> list[dict[str, Any]]:
        rows = []
        for pair in self.groups():
            for me, other in (pair, pair[::-1]):
                move, theirs = self._moves.get(me), self._moves.get(other)
                payoff = self.matrix[(move, theirs)] if move and theirs else None  # type: ignore[index]  # this game's moves are strings
                rows.append({"round": self._round, "agent_id": me, "partner": other, "moved": move is not None,
                             "move": move, "partner_move": theirs, "payoff": payoff})
                if move:
                    self._add("moves", 1)
                    self._add("cooperate", int(move == "cooperate"))
        return rows

    def summary(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        return {"cooperation_rate": mean_or_none([r["move"] == "cooperate" for r in rows if r["move"]])}


_PG_MOVES = moves_schema(
    "public_goods_contributions", ("group", "int64", "index of the player's group"), ("group_size", "int64", "members of that group"),
    ("moved", "bool", "whether the player contributed this round"),
    ("contribution", "int64", "tokens contributed (null: no move, the endowment was kept)"),
    ("pool", "float64", "the group's total contribution"), ("share", "float64", "each member's share of the multiplied pool"))
_PG_ROUNDS = rounds_schema("public_goods_rounds", ("mean_contribution", "float64", "mean contribution of the players who moved"),
                           ("contribution_rate", "float64", "the mean contribution as a share of the endowment"))


class PublicGoodsGame(RoundGame):
    """A repeated public goods game: group members contribute tokens to a pool that is multiplied and shared.

    Every round each member receives ``endowment`` tokens and may ``contribute`` 0 to all of them
    (once per round); when the round ends the pool is multiplied and split equally among all
    members, and kept tokens stay with their owner. ``public_goods_status`` shows the agent's
    group, total and past rounds with every member's contribution.

    Args:
        endowment: tokens each member receives per round.
        multiplier: the pool is multiplied by this before it is shared.
        group_size: members per group when groups are formed from the bound agents (a leftover
            single agent joins the last group).
        groups: fixed groups of agent ids; by default the bound agents in ascending id order.
        history_limit: past rounds shown to each player.
    """

    game = "public goods game"
    _moves_schema, _rounds_schema = _PG_MOVES, _PG_ROUNDS
    METRICS = round_metrics(_PG_ROUNDS)

    def __init__(self, endowment: int = 10, multiplier: float = 1.6, group_size: int = 4,
                 groups: list[list[int]] | None = None, history_limit: int = 10) -> None:
        super().__init__(groups, history_limit, size=group_size)
        if endowment < 1 or multiplier <= 0:
            raise SpecError("PublicGoodsGame needs endowment >= 1 and multiplier > 0")
        self.endowment, self.multiplier = endowment, multiplier

    @tool(readonly=False)
    def contribute(self, agent_id: int, amount: int, round: int | None = None) -> str:
        """Contribute 0 to endowment tokens to the group's pool in the open round (once per round)."""
        self._open_move(agent_id, round)
        if not 0 <= amount <= self.endowment:
            raise ValueError(f"you can contribute 0 to {self.endowment} tokens, not {amount}")
        return f"you contribute {amount} of your {self.endowment} tokens in " + self._record(agent_id, amount)

    @tool(readonly=True, kind="observe")
    def public_goods_status(self, agent_id: int) -> str:
        """agent_id's group, total tokens and past rounds with every member's contribution."""
        return self._status(agent_id)

    @tool(readonly=True, kind="statistics")
    def public_goods_statistics(self) -> str:
        """Rounds resolved, the mean contribution overall and last round, and the mean payoff."""
        n = self._agg.get("contributions_n", 0)
        mean = self._agg["contributions"] / n if n else None
        last = self.summary(self._last)["mean_contribution"] if self._last else None
        share = None if mean is None else mean / self.endowment
        return (f"{self._round - 1} rounds resolved; mean contribution {fmt_or_na(mean, '.2f')} tokens "
                f"({fmt_or_na(share, '.0%')} of the endowment) overall, {fmt_or_na(last, '.2f')} last round; {self._mean_payoff_text()}")

    def describe_match(self, agent_id: int, group: list[int]) -> str:
        return (f"your group is agents {', '.join(map(str, group))}. Each round every member receives {self.endowment} tokens; "
                f"the pool is multiplied by {self.multiplier:g} and shared equally.")

    def describe_round(self, row: dict[str, Any]) -> str:
        mine = f"you contributed {row['contribution']}" if row["moved"] else f"you made no move (kept your {self.endowment} tokens)"
        others = ", ".join(f"agent {a}: {'no move' if c is None else c}" for a, c in row["others"])
        return (f"- round {row['round']}: {mine}; {others}; pool {row['pool']:g} x {self.multiplier:g} shared by "
                f"{row['group_size']}: {row['share']:g} each; you got {row['payoff']:g}")

    def resolve(self) -> list[dict[str, Any]]:
        rows = []
        for index, group in enumerate(self.groups()):
            given = {a: self._moves.get(a) for a in group}
            pool = sum(int(c or 0) for c in given.values())
            share = round(pool * self.multiplier / len(group), 6)
            for a in group:
                c = given[a]
                rows.append({"round": self._round, "agent_id": a, "group": index, "group_size": len(group), "moved": c is not None,
                             "contribution": c, "pool": float(pool), "share": share, "payoff": self.endowment - int(c or 0) + share,
                             "others": [[b, given[b]] for b in group if b != a]})
                if c is not None:
                    self._add("contributions", int(c))
                    self._add("contributions_n", 1)
        return rows

    def summary(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        mean = mean_or_none([r["contribution"] for r in rows if r["moved"]])
        return {"mean_contribution": mean, "contribution_rate": None if mean is None else mean / self.endowment}


_TRUST_MOVES = moves_schema(
    "trust_game_moves", ("role", "string", "investor | trustee"), ("partner", "int64", "the other player"),
    ("moved", "bool", "whether the player moved this round"),
    ("amount", "int64", "tokens sent (investor) or returned (trustee); null: no move"),
    ("received", "float64", "tokens that reached the player: the return (investor), the multiplied investment (trustee)"),
    ("returnable", "float64", "trustee: tokens it could return this round (received at the end of the round before)"))
_TRUST_ROUNDS = rounds_schema(
    "trust_game_rounds", ("invested", "float64", "tokens sent by all investors"), ("returned", "float64", "tokens returned by all trustees"),
    ("trust_ratio", "float64", "mean share of the endowment sent, over investors who moved"),
    ("return_ratio", "float64", "tokens returned / tokens returnable, over trustees who moved and had something to return"))


class TrustGame(RoundGame):
    """A repeated trust game: investors send tokens that are multiplied for their trustees, who return a part.

    Each round the investor receives ``endowment`` tokens and may ``invest`` (send) any part of them;
    what is sent is multiplied and reaches the trustee at the end of the round. In the next round
    the trustee may ``return_tokens``: any part of what it received (what it keeps is its own).
    One move per player per round. ``trust_game_status`` shows the agent's role, partner, what it
    can return now, its total and past rounds.

    Args:
        endowment: the investor's tokens per round.
        multiplier: what the investor sends is multiplied by this.
        pairs: fixed ``[investor, trustee]`` pairs; by default the bound agents in ascending id
            order, the lower id of each pair investing.
        history_limit: past rounds shown to each player.
    """

    game = "trust game"
    _moves_schema, _rounds_schema = _TRUST_MOVES, _TRUST_ROUNDS
    METRICS = round_metrics(_TRUST_ROUNDS)

    def __init__(self, endowment: int = 10, multiplier: float = 3.0, pairs: list[list[int]] | None = None,
                 history_limit: int = 10) -> None:
        super().__init__(pairs, history_limit)
        if endowment < 1 or multiplier <= 0:
            raise SpecError("TrustGame needs endowment >= 1 and multiplier > 0")
        self.endowment, self.multiplier = endowment, multiplier
        self._returnable: dict[int, float] = {}  #: trustee -> tokens received at the end of the last round

    def _role_move(self, agent_id: int, round_: int | None, role: int, amount: int) -> None:
        pair = self._open_move(agent_id, round_)
        if pair[role] != agent_id:
            mine, other_tool = ("trustee", "return_tokens") if role == 0 else ("investor", "invest")
            raise ValueError(f"agent {agent_id} is the {mine} in this trust game and moves with {other_tool}")
        if amount < 0:
            raise ValueError(f"an amount cannot be negative ({amount})")

    @tool(readonly=False)
    def invest(self, agent_id: int, amount: int, round: int | None = None) -> str:
        """As investor, send 0 to endowment tokens to the trustee in the open round (once per round)."""
        self._role_move(agent_id, round, 0, amount)
        if amount > self.endowment:
            raise ValueError(f"you can send 0 to {self.endowment} tokens, not {amount}")
        return f"you send {amount} tokens (the trustee receives {amount * self.multiplier:g}) in " + self._record(agent_id, amount)

    @tool(readonly=False)
    def return_tokens(self, agent_id: int, amount: int, round: int | None = None) -> str:
        """As trustee, return tokens to the investor in the open round: at most what you received at the end of the last round."""
        self._role_move(agent_id, round, 1, amount)
        available = self._returnable.get(agent_id, 0)
        if amount > available:
            if not available:
                raise ValueError("you have nothing to return yet: what the investor sends in a round reaches you at the end "
                                 "of that round, and you can return part of it in the next round")
            raise ValueError(f"you can return 0 to {available:g} tokens (what you received last round), not {amount}")
        return f"you return {amount} of {available:g} tokens in " + self._record(agent_id, amount)

    @tool(readonly=True, kind="observe")
    def trust_game_status(self, agent_id: int) -> str:
        """agent_id's role, partner, what it can return now, total tokens and past rounds."""
        return self._status(agent_id)

    @tool(readonly=True, kind="statistics")
    def trust_game_statistics(self) -> str:
        """Rounds resolved, the trust ratio (share of the endowment sent) and the return ratio (share returned)."""
        trust = self._agg["sent"] / (self._agg["sent_n"] * self.endowment) if self._agg.get("sent_n") else None
        back = self._agg["returned"] / self._agg["returnable"] if self._agg.get("returnable") else None
        return (f"{self._round - 1} rounds resolved; investors sent {fmt_or_na(trust, '.0%')} of their endowment (trust ratio); "
                f"trustees returned {fmt_or_na(back, '.0%')} of what they could return (return ratio); {self._mean_payoff_text()}")

    def describe_match(self, agent_id: int, group: list[int]) -> str:
        investor, trustee = group
        if agent_id == investor:
            return (f"you are the investor and agent {trustee} is the trustee. Each round you receive {self.endowment} tokens "
                    f"and may send any part with invest; it is multiplied by {self.multiplier:g} and reaches agent {trustee} "
                    f"at the end of the round, and agent {trustee} may return part of it in the next round.")
        available = self._returnable.get(agent_id, 0)
        can = f"This round you can return 0 to {available:g} tokens." if available else "This round you have nothing to return."
        return (f"you are the trustee and agent {investor} is the investor. What agent {investor} sends in a round is multiplied "
                f"by {self.multiplier:g} and reaches you at the end of that round; in the next round you may return any part "
                f"of it with return_tokens. {can}")

    def describe_round(self, row: dict[str, Any]) -> str:
        r, p = f"- round {row['round']}: ", row["partner"]
        if row["role"] == "investor":
            sent = f"you sent {row['amount']} (agent {p} received {row['amount'] * self.multiplier:g})" if row["moved"] else "you made no move"
            back = f"agent {p} returned {row['received']:g}" if row["partner_moved"] else f"agent {p} made no move"
            return f"{r}{sent}; {back}; you got {row['payoff']:g}"
        sent = f"agent {p} sent {row['partner_amount']}" if row["partner_moved"] else f"agent {p} made no move"
        if not row["moved"]:
            back = "you made no move"
        else:
            back = f"you returned {row['amount']} of the {row['returnable']:g} you could" if row["returnable"] else "you had nothing to return"
        return f"{r}{sent} and you received {row['received']:g}; {back}; you got {row['payoff']:g}"

    def resolve(self) -> list[dict[str, Any]]:
        rows, returnable = [], {}
        for investor, trustee in self.groups():
            sent, back = self._moves.get(investor), self._moves.get(trustee)
            available = self._returnable.get(trustee, 0)
            received = round(int(sent or 0) * self.multiplier, 6)
            rows.append({"round": self._round, "agent_id": investor, "role": "investor", "partner": trustee, "moved": sent is not None,
                         "amount": sent, "received": float(back or 0), "returnable": None, "partner_moved": back is not None,
                         "partner_amount": back, "payoff": self.endowment - int(sent or 0) + int(back or 0)})
            rows.append({"round": self._round, "agent_id": trustee, "role": "trustee", "partner": investor, "moved": back is not None,
                         "amount": back, "received": received, "returnable": float(available), "partner_moved": sent is not None,
                         "partner_amount": sent, "payoff": received - int(back or 0)})
            returnable[trustee] = received
            if sent is not None:
                self._add("sent", int(sent))
                self._add("sent_n", 1)
            if back is not None and available:
                self._add("returned", int(back))
                self._add("returnable", available)
        self._returnable = returnable
        return rows

    def summary(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        sent = [r["amount"] for r in rows if r["role"] == "investor" and r["moved"]]
        back = [r for r in rows if r["role"] == "trustee" and r["moved"]]
        answered = [r for r in back if r["returnable"]]
        return {"invested": float(sum(sent)), "returned": float(sum(r["amount"] for r in back)),
                "trust_ratio": mean_or_none([s / self.endowment for s in sent]),
                "return_ratio": sum(r["amount"] for r in answered) / sum(r["returnable"] for r in answered) if answered else None}

    def dump_state(self) -> dict[str, Any]:
        return {**super().dump_state(), "returnable": {str(k): v for k, v in self._returnable.items()}}

    def load_state(self, state: dict[str, Any]) -> None:
        super().load_state(state)
        self._returnable = {int(k): v for k, v in state["returnable"].items()}
