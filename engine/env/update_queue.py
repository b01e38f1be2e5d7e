"""UpdateQueue: the updates an env module's tools queued during a tick, applied exactly once.

Env updates are synchronous: a mutating tool checks its arguments against the start-of-tick state,
queues an update and returns; the env step applies the tick's updates in (agent id, call order)
order, so every agent reads the same state and the outcome does not depend on how agents were
batched or interleaved. When an agent-step is re-run after its worker died, the updates the first
attempt queued are discarded by agent id before the retry queues them again.

The queue holds plain data: an update's fields must be JSON-able, so the queue can be written into
the env snapshot beside the module's own state. This module has no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Update", "UpdateQueue"]


@dataclass(frozen=True)
class Update:
    """One queued update: who queued it, its place in the call order, and the module's fields.

    ``update["kind"]`` reads a field.
    """

    agent_id: int  #: the agent whose step queued it (the experimenter's id for interventions)
    seq: int  #: its position in the module's call order, over the whole run
    fields: Mapping[str, Any] = field(default_factory=dict)  #: what the module needs to apply it (JSON-able)

    def __getitem__(self, key: str) -> Any:
        return self.fields[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.fields.get(key, default)


class UpdateQueue:
    """The updates queued since the last drain, kept by agent: what one agent queued is found and dropped without a
    pass over everyone's (a tool checking a like against the agent's earlier ones, at a million members a tick)."""

    def __init__(self) -> None:
        self._by_agent: dict[int, list[Update]] = {}
        self._count = 0
        self._seq = 0

    def __len__(self) -> int:
        return self._count

    def queue(self, agent_id: int, **fields: Any) -> Update:
        """Queue an update on behalf of ``agent_id``; returns it."""
        self._seq += 1
        update = Update(agent_id, self._seq, dict(fields))
        self._by_agent.setdefault(agent_id, []).append(update)
        self._count += 1
        return update

    def of(self, agent_id: int) -> list[Update]:
        """The updates ``agent_id`` queued, in call order (a tool checks a call against its own earlier ones)."""
        return list(self._by_agent.get(agent_id, ()))

    def all(self) -> list[Update]:
        """Every queued update, in call order."""
        return sorted((u for queued in self._by_agent.values() for u in queued), key=lambda u: u.seq)

    def discard(self, agent_id: int) -> int:
        """Drop the updates ``agent_id`` queued; returns how many."""
        dropped = len(self._by_agent.pop(agent_id, ()))
        self._count -= dropped
        return dropped

    def drain(self) -> list[Update]:
        """Remove and return every queued update in (agent id, seq) order (the experimenter's first)."""
        drained = [u for agent_id in sorted(self._by_agent) for u in self._by_agent[agent_id]]
        self._by_agent, self._count = {}, 0
        return drained

    # ---- persistence -------------------------------------------------------------------------
    def dump(self) -> dict[str, Any]:
        """The queue as JSON-able data (restore it with :meth:`load`)."""
        return {"seq": self._seq, "updates": [{"agent_id": u.agent_id, "seq": u.seq, "fields": dict(u.fields)} for u in self.all()]}

    def load(self, state: Mapping[str, Any]) -> None:
        """Replace the queue by what :meth:`dump` produced."""
        self._by_agent, self._count = {}, 0
        for u in state["updates"]:
            self._by_agent.setdefault(int(u["agent_id"]), []).append(Update(int(u["agent_id"]), int(u["seq"]), dict(u["fields"])))
            self._count += 1
        self._seq = int(state["seq"])
