"""GlobalInformationSpace: public facts that every agent can read, each with a time and a source.

Facts come from the experiment (initial facts, optionally dated in the future so they are released
when the clock reaches them) and from agents' broadcasts. Updates are synchronous, as in
MessagingSpace: a broadcast made during a tick is queued and published when the tick's env step
runs, in (agent id, call order) order, stamped with the step's end time; reads during a tick see
the facts published before it began.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from engine.env.base import EnvBase
from engine.env.modules.times import parse_time
from engine.env.tool import tool
from engine.env.update_queue import Update
from engine.errors import SpecError
from engine.storage.catalog import Column, DatasetSchema

__all__ = ["GlobalInformationSpace"]

_TOKEN = re.compile(r"\w+")

_STATE = DatasetSchema(
    name="global_info_state",
    kind="env",
    description="GlobalInformationSpace totals after each env step",
    columns=(
        Column(name="step", type="int64", description="society step (1-based) that just ended"),
        Column(name="t", type="timestamp", description="simulated time at the end of the step"),
        Column(name="published", type="int64", description="facts published in this step"),
        Column(name="facts_total", type="int64", description="facts public at the end of the step"),
        Column(name="broadcasts_total", type="int64", description="facts broadcast by agents since the start"),
        Column(name="scheduled", type="int64", description="initial facts dated after the end of the step, not yet public"),
    ),
)
_FACTS = DatasetSchema(
    name="global_info_facts",
    kind="env",
    description="every fact, in the step in which it became public",
    columns=(
        Column(name="step", type="int64", description="step in which it became public"),
        Column(name="t", type="timestamp", description="simulated time at the end of that step"),
        Column(name="fact_id", type="int64", description="fact id"),
        Column(name="time", type="timestamp", description="the fact's own timestamp"),
        Column(name="source", type="string", description="who the fact comes from"),
        Column(name="agent_id", type="int64", description="broadcasting agent (null for initial facts)"),
        Column(name="text", type="string", description="the fact"),
    ),
)


class GlobalInformationSpace(EnvBase):
    """Public news: every agent can read the latest facts (each with its time and source) and broadcast a fact to everyone.

    A broadcast becomes public at the end of the current step, with you as its source.

    Args:
        facts: initial facts, each a string or ``{text, source?, time?}``; a fact with an ISO
            ``time`` later than the start stays hidden until the clock reaches it.
        news_limit: how many facts ``latest_news`` shows.
        max_length: longest broadcast accepted, in characters.
        default_source: the source of initial facts that name none.
    """

    METRICS = {
        "published": "facts that became public in this step (broadcasts and scheduled facts)",
        "broadcasts": "facts agents broadcast that became public in this step",
        "facts_public": "facts public at the end of this step",
    }

    def __init__(
        self,
        facts: list[str | dict[str, Any]] | None = None,
        news_limit: int = 5,
        max_length: int = 500,
        default_source: str = "world",
    ) -> None:
        super().__init__()
        if news_limit < 1 or max_length < 1:
            raise SpecError("news_limit and max_length must be positive")
        self._limit = news_limit
        self._max_length = max_length
        self._facts: list[dict[str, Any]] = []
        for i, spec in enumerate(facts or []):
            item = {"text": spec} if isinstance(spec, str) else spec
            if not isinstance(item, dict) or not str(item.get("text", "")).strip():
                raise SpecError(f"GlobalInformationSpace facts[{i}]: a fact needs a non-empty text")
            try:
                when = None if item.get("time") is None else parse_time(item["time"], "time")
            except ValueError as error:
                raise SpecError(f"GlobalInformationSpace facts[{i}]: {error}") from None
            self._facts.append({"id": i + 1, "text": str(item["text"]).strip(), "source": str(item.get("source") or default_source),
                                "agent_id": None, "time": when, "published": False})
        self._published_last: list[int] = []

    async def init(self, start_datetime: datetime) -> None:
        await super().init(start_datetime)
        for fact in self._facts:  # undated initial facts are public from the start
            if fact["time"] is None:
                fact["time"] = start_datetime

    def _visible(self) -> list[dict[str, Any]]:
        """Public facts, newest first."""
        shown = [f for f in self._facts if f["time"] is None or self.t is None or f["time"] <= self.t]
        return sorted(shown, key=lambda f: (f["time"] or datetime.min, f["id"]), reverse=True)

    def _render(self, fact: dict[str, Any]) -> str:
        when = "at the start" if fact["time"] is None else f"{fact['time']:%Y-%m-%d %H:%M}"
        return f"- [{when}, from {fact['source']}] {fact['text']}"

    # ---- tools -------------------------------------------------------------------------------
    @tool(readonly=False)
    def broadcast(self, agent_id: int, text: str) -> str:
        """Broadcast a fact to everyone; it becomes public at the end of this step with you as the source."""
        self.check_agent(agent_id)
        text = text.strip()
        if not text:
            raise ValueError("an empty broadcast cannot be sent")
        if len(text) > self._max_length:
            raise ValueError(f"broadcast longer than {self._max_length} characters")
        self.updates.queue(agent_id, text=text)
        return "broadcast queued; everyone can read it from the next step"

    @tool(readonly=True, kind="observe")
    def latest_news(self, agent_id: int) -> str:
        """Show the most recent public facts, newest first, with their times and sources."""
        facts = self._visible()
        if not facts:
            return "There is no news."
        shown = facts[: self._limit]
        return f"Latest news ({len(shown)} of {len(facts)}):\n" + "\n".join(self._render(f) for f in shown)

    @tool(readonly=True)
    def search_news(self, agent_id: int, query: str, limit: int = 5) -> str:
        """Search public facts by words; facts matching more of the query's words come first, then newer ones."""
        words = {w.lower() for w in _TOKEN.findall(query)}
        if not words:
            raise ValueError("the search query has no words")
        if limit < 1:
            raise ValueError("limit must be at least 1")
        scored = [(len(words & {w.lower() for w in _TOKEN.findall(f["text"])}), rank, f) for rank, f in enumerate(self._visible())]
        hits = sorted((s for s in scored if s[0]), key=lambda s: (-s[0], s[1]))
        if not hits:
            return f"No news matches {query!r}."
        return f"{len(hits)} facts match {query!r}:\n" + "\n".join(self._render(f) for _, _, f in hits[:limit])

    @tool(readonly=True, kind="statistics")
    def news_statistics(self) -> str:
        """Totals: public facts, agents' broadcasts, and facts scheduled for later."""
        public = len(self._visible())
        broadcasts = sum(1 for f in self._facts if f["agent_id"] is not None)
        return f"{public} public facts ({broadcasts} broadcast by agents); {len(self._facts) - public} scheduled for later"

    # ---- the step ----------------------------------------------------------------------------
    def apply_update(self, update: Update) -> None:
        """Add a queued broadcast as a fact dated ``self.t``: readable at once, counted as published by the next env step."""
        self._facts.append({"id": len(self._facts) + 1, "text": update["text"], "source": f"agent {update.agent_id}",
                            "agent_id": update.agent_id, "time": self.t, "published": False})

    async def step(self, tick: int, t: datetime) -> None:
        self.t = t
        self.apply_pending()
        self._published_last = []
        for fact in self._facts:
            if not fact["published"] and (fact["time"] is None or fact["time"] <= t):
                fact["published"] = True
                self._published_last.append(fact["id"])

    # ---- replay and persistence --------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        by_id = {f["id"]: f for f in self._facts}
        return {"published": float(len(self._published_last)),
                "broadcasts": float(sum(1 for i in self._published_last if by_id[i]["agent_id"] is not None)),
                "facts_public": float(sum(1 for f in self._facts if f["published"]))}

    @classmethod
    def replay_datasets(cls) -> list[DatasetSchema]:
        return [_STATE, _FACTS]

    def replay_rows(self, step: int, t: datetime) -> dict[str, list[dict[str, Any]]]:
        by_id = {f["id"]: f for f in self._facts}
        state = {
            "step": step, "t": t, "published": len(self._published_last),
            "facts_total": sum(1 for f in self._facts if f["published"]),
            "broadcasts_total": sum(1 for f in self._facts if f["agent_id"] is not None),
            "scheduled": sum(1 for f in self._facts if not f["published"]),
        }
        facts = [{"step": step, "t": t, "fact_id": i, "time": by_id[i]["time"], "source": by_id[i]["source"],
                  "agent_id": by_id[i]["agent_id"], "text": by_id[i]["text"]} for i in self._published_last]
        return {_STATE.name: [state], _FACTS.name: facts}

    def dump_state(self) -> dict[str, Any]:
        return {
            "facts": [{**f, "time": f["time"].isoformat() if f["time"] else None} for f in self._facts],
            "published_last": self._published_last,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self._facts = [{**f, "time": datetime.fromisoformat(f["time"]) if f["time"] else None} for f in state["facts"]]
        self._published_last = list(state["published_last"])
