"""The driver's typed control of the env router actor: what it sends as a transaction begins and ends, and what the
actor answers.

A tick costs two actor round trips: :class:`BeginTick` (the simulated time, the router's share of the budget) before
the batches run, :class:`EndTick` after them, answered by a :class:`TickEnd` (the router's LLM call records, the calls
the budget refused and, when the env stepped, its staged keys and snapshot). An ask or intervene costs two as well
(:class:`BeginTick` without a time, then :class:`EndConsult`), one without a budget (:attr:`BeginTick.idle`).

Plain values: no Dask, no event loop, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.llm.budget import Allowance
    from engine.llm.meter import CallRecord

__all__ = ["BeginTick", "EndConsult", "EndTick", "TickEnd"]


@dataclass(frozen=True)
class BeginTick:
    """A transaction begins: a tick's simulated time, and the router's share of the transaction's budget."""

    t: datetime | None  #: when the tick starts; None: an ask or intervene between ticks (the env's time stays)
    #: what the router's LLM calls may spend until the transaction ends; None: the run has no budget (the gate stays)
    allowance: Allowance | None = None

    @property
    def idle(self) -> bool:
        """Nothing to tell the actor (an ask or intervene without a budget): no round trip."""
        return self.t is None and self.allowance is None


@dataclass(frozen=True)
class EndTick:
    """A tick's batches are done: step the env inside transaction ``txn``, unless the budget stopped or refused anything."""

    step: int  #: the society step (1-based) the tick is
    tick: int  #: the tick's length, in seconds
    t_end: datetime  #: the simulated time the tick ends at
    txn: int
    run: str  #: the run id every staged row carries
    stopped: int = 0  #: agent-steps the batches' budget stopped

    def steps(self, refused: int) -> bool:
        """Whether the env steps, ``refused`` router calls having been refused: only when the budget stopped and
        refused nothing (else nothing of the tick commits and the run waits for more budget)."""
        return not self.stopped and not refused


@dataclass(frozen=True)
class EndConsult:
    """An ask or intervene (transaction ``txn``) is done; an intervention (``settle``) applies the updates it queued
    and snapshots the env, unless the budget refused a router call."""

    txn: int
    settle: bool = False

    def settles(self, refused: int) -> bool:
        return self.settle and not refused


@dataclass(frozen=True)
class TickEnd:
    """What the actor answers as a transaction ends."""

    records: tuple[CallRecord, ...]  #: the router's LLM calls since the last end (with their text, for ``transcripts``)
    refused: int  #: router calls the budget refused since :class:`BeginTick`
    staged: tuple[str, ...] = ()  #: the env step's staged keys (none when it did not step)
    counts: Mapping[str, int] = field(default_factory=dict)  #: the env step's rows per dataset
    snapshot: str | None = None  #: the env snapshot the transaction commits; None: not stepped or settled, or no run
