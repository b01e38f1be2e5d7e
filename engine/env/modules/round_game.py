"""RoundGame: the shared machinery of repeated games played one round per env step.

Updates are synchronous: every player makes at most one move per round, a move is queued while the
round is open and recorded when the env step runs (or an intervention is settled), and the round is
resolved by the env step after the moves are recorded, so no player sees
another's move before the round ends and the outcome does not depend on call order or batching.
Players are matched by a game's ``pairs`` / ``groups`` kwarg, or else from the bound agent ids in
ascending order. A player who makes no move is recorded as such (move null), never given an
invented move.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

from engine.env.base import EnvBase
from engine.env.update_queue import Update
from engine.errors import SpecError
from engine.storage.catalog import Column, DatasetSchema

__all__ = ["RoundGame", "fmt_or_na", "mean_or_none", "moves_schema", "round_metrics", "rounds_schema"]

_HEAD = (("step", "int64", "society step (1-based) that just ended"), ("t", "timestamp", "simulated time at the end of the step"),
         ("round", "int64", "the round resolved in this step"))


def _schema(name: str, description: str, spec: list[tuple[str, str, str]]) -> DatasetSchema:
    columns = tuple(Column(name=n, type=ty, description=d) for n, ty, d in [*_HEAD, *spec])
    return DatasetSchema(name=name, kind="env", description=description, columns=columns)


def moves_schema(name: str, *extra: tuple[str, str, str]) -> DatasetSchema:
    """A per-player dataset: step, t, round, agent_id, ``extra`` columns (must include ``moved``), payoff, total."""
    return _schema(name, "each player's move and payoff per round", [
        ("agent_id", "int64", "the player"), *extra, ("payoff", "float64", "what the player earned this round (null: no payoff)"),
        ("total", "float64", "the player's payoff summed over all rounds so far")])


def rounds_schema(name: str, *extra: tuple[str, str, str]) -> DatasetSchema:
    """A per-round dataset: step, t, round, players, moves, ``extra`` columns, mean_payoff."""
    return _schema(name, "one row per resolved round", [
        ("players", "int64", "players matched this round"), ("moves", "int64", "moves made this round"), *extra,
        ("mean_payoff", "float64", "mean payoff of the players who earned one (none when no one did)")])


def round_metrics(schema: DatasetSchema) -> dict[str, str]:
    """A game's metrics: the columns of its rounds dataset after step, t and round (one round per env step)."""
    return {c.name: c.description for c in schema.columns[len(_HEAD):]}


def mean_or_none(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def fmt_or_na(value: float | None, spec: str) -> str:
    return "n/a" if value is None else format(value, spec)


class RoundGame(EnvBase):
    """Base of the repeated games: matching, one move per round, resolution at the step, history, replay and state.

    A game sets ``game`` (its name in messages), ``unit`` and its two dataset schemas, makes its
    move tools call :meth:`_open_move` then :meth:`_record`, and implements :meth:`describe_match`,
    :meth:`describe_round`, :meth:`resolve` and :meth:`summary`.

    Args:
        groups: fixed pairs / groups of agent ids (None: match the bound agents).
        history_limit: past rounds kept and shown to each player.
        size: None for pairs, else the group size used when matching the bound agents.

    Raises:
        SpecError: fixed pairs / groups of the wrong size, or a player in two of them.
    """

    game: ClassVar[str]
    unit: ClassVar[str] = "tokens"
    _moves_schema: ClassVar[DatasetSchema]
    _rounds_schema: ClassVar[DatasetSchema]

    def __init__(self, groups: list[list[int]] | None, history_limit: int, size: int | None = None) -> None:
        super().__init__()
        seen: list[int] = [a for g in groups or [] for a in g]
        if (size is not None and size < 2) or len(seen) != len(set(seen)) or any(len(g) != 2 if size is None else len(g) < 2 for g in groups or []):
            kind = "pairs of two" if size is None else "groups of at least two"
            raise SpecError(f"{type(self).__name__}: players must be in {kind}, each player in one; got {groups!r} (size {size})")
        self._size = size
        self._fixed = [list(g) for g in groups] if groups else None
        self._agent_ids: list[int] = []
        self._matched: list[list[int]] | None = None
        self._where: dict[int, list[int]] = {}
        self._history_limit = history_limit
        self._round = 1
        self._moves: dict[int, int | str] = {}
        self._past: dict[int, list[dict[str, Any]]] = {}
        self._last: list[dict[str, Any]] = []
        self._totals: dict[int, float] = {}
        self._agg: dict[str, float] = {}

    def bind_agents(self, agent_ids: list[int]) -> None:
        """Match the agents (when no ``pairs`` / ``groups`` were given): ascending ids, in consecutive groups.

        Raises:
            SpecError: fixed pairs / groups name an agent that does not exist.
        """
        self._agent_ids = sorted(set(agent_ids))
        unknown = sorted({a for g in self._fixed or [] for a in g} - set(self._agent_ids))
        if unknown:
            raise SpecError(f"{type(self).__name__}: the players {unknown} are not agents of this run")
        self._matched = None

    def groups(self) -> list[list[int]]:
        """The matched players: pairs (an odd one out sits out), or groups (a leftover single player joins the last group)."""
        if self._matched is None:
            ids, size = self._agent_ids, self._size or 2
            chunks = [ids[i:i + size] for i in range(0, len(ids), size)]
            if chunks and len(chunks[-1]) == 1:
                leftover = chunks.pop()
                if self._size is not None and chunks:
                    chunks[-1] += leftover
            self._matched = self._fixed if self._fixed is not None else chunks
            self._where = {a: g for g in self._matched for a in g}
        return self._matched

    def _group(self, agent_id: int) -> list[int] | None:
        self.groups()
        return self._where.get(agent_id)

    def _open_move(self, agent_id: int, round_: int | None) -> list[int]:
        group = self._group(agent_id)
        if group is None:
            raise ValueError(f"agent {agent_id} is not a player in this {self.game}")
        if round_ is not None and round_ != self._round:
            raise ValueError(f"round {self._round} of the {self.game} is open, not round {round_}")
        if self._moved(agent_id):
            raise ValueError(f"you already moved in round {self._round} of the {self.game}; "
                             "one move per round, the result comes at the end of the round")
        return group

    def _record(self, agent_id: int, move: int | str) -> str:
        self.updates.queue(agent_id, move=move)
        return f"round {self._round}: the result comes at the end of the round"

    def _moved(self, agent_id: int) -> bool:
        return agent_id in self._moves or bool(self.updates.of(agent_id))

    def _status(self, agent_id: int) -> str:
        """The observation: the match, whether the agent has moved, its total and its past rounds."""
        group = self._group(agent_id)
        if group is None:
            return f"You are not a player in this {self.game}."
        moved = "Your move for this round is in." if self._moved(agent_id) else "You have not moved yet this round."
        lines = [f"{self.game[0].upper()}{self.game[1:]}, round {self._round}: {self.describe_match(agent_id, group)}",
                 moved, f"Your total so far: {self._totals.get(agent_id, 0):g} {self.unit}."]
        past = [self.describe_round(r) for r in self._past.get(agent_id, [])]
        return "\n".join(lines + (["Past rounds (latest last):", *past] if past else []))

    def _mean_payoff_text(self) -> str:
        n = self._agg.get("payoff_n", 0)
        return f"mean payoff per player per round {fmt_or_na(self._agg['payoff_sum'] / n if n else None, '.2f')}"

    # ---- what a game defines -----------------------------------------------------------------
    def describe_match(self, agent_id: int, group: list[int]) -> str:
        raise NotImplementedError

    def describe_round(self, row: dict[str, Any]) -> str:
        raise NotImplementedError

    def resolve(self) -> list[dict[str, Any]]:
        """One row per matched player for the open round (keys: the moves dataset's columns and more)."""
        raise NotImplementedError

    def summary(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        """The rounds-dataset values of a resolved round beyond players, moves and mean payoff."""
        raise NotImplementedError

    # ---- the env step ------------------------------------------------------------------------
    def _add(self, key: str, value: float) -> None:
        self._agg[key] = self._agg.get(key, 0) + value

    def apply_update(self, update: Update) -> None:
        """Record a queued move in the open round."""
        self._moves[update.agent_id] = update["move"]

    async def step(self, tick: int, t: datetime) -> None:
        self.apply_pending()
        rows = self.resolve()
        for row in rows:
            if row["payoff"] is not None:
                row["payoff"] = round(row["payoff"], 6)
                self._totals[row["agent_id"]] = round(self._totals.get(row["agent_id"], 0) + row["payoff"], 6)
                self._add("payoff_sum", row["payoff"])
                self._add("payoff_n", 1)
            row["total"] = self._totals.get(row["agent_id"], 0.0)
            kept = self._past.setdefault(row["agent_id"], [])
            kept.append(row)
            del kept[:-self._history_limit]
        self._last = rows
        self._moves = {}
        self._round += 1
        self.t = t

    @classmethod
    def replay_datasets(cls) -> list[DatasetSchema]:
        return [cls._moves_schema, cls._rounds_schema]

    def _round_summary(self) -> dict[str, Any]:
        """The last resolved round's values beyond step, t and round (None: no value, e.g. no one moved)."""
        earned = [r["payoff"] for r in self._last if r["payoff"] is not None]
        return {"players": len(self._last), "moves": sum(1 for r in self._last if r["moved"]),
                "mean_payoff": mean_or_none(earned), **self.summary(self._last)}

    def metrics(self) -> dict[str, float]:
        """The rounds dataset's values of the round this step resolved (none without players)."""
        if not self._last:
            return {}
        return {name: float(value) for name, value in self._round_summary().items() if value is not None}

    def replay_rows(self, step: int, t: datetime) -> dict[str, list[dict[str, Any]]]:
        if not self._last:
            return {self._moves_schema.name: [], self._rounds_schema.name: []}
        head = {"step": step, "t": t, "round": self._last[0]["round"]}
        moves = [{**head, **{c.name: r.get(c.name) for c in self._moves_schema.columns[3:]}} for r in self._last]
        return {self._moves_schema.name: moves, self._rounds_schema.name: [{**head, **self._round_summary()}]}

    def dump_state(self) -> dict[str, Any]:
        return {"round": self._round, "moves": {str(k): v for k, v in self._moves.items()},
                "history": {str(k): v for k, v in self._past.items()}, "last": self._last,
                "totals": {str(k): v for k, v in self._totals.items()}, "agg": self._agg}

    def load_state(self, state: dict[str, Any]) -> None:
        self._round = state["round"]
        self._moves = {int(k): v for k, v in state["moves"].items()}
        self._past = {int(k): v for k, v in state["history"].items()}
        self._last = state["last"]
        self._totals = {int(k): v for k, v in state["totals"].items()}
        self._agg = dict(state["agg"])
