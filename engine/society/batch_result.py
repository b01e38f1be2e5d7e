"""BatchResult: what a tick's batch task sends the driver (its rows stay on disk)."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.llm.budget import Usage
from engine.society.tiered.telemetry import CallSizes
from engine.society.transcripts import TranscriptTally

__all__ = ["BatchResult"]


@dataclass(frozen=True)
class BatchResult:
    """What the driver needs back (rows themselves stay on disk)."""

    step: int
    batch: int
    agents: int  #: agent-steps committed (rows written)
    replayed: int  #: of which committed by an earlier attempt and re-emitted
    statuses: dict[str, int]
    llm_calls: int
    input_tokens: int
    output_tokens: int
    env_calls: int
    usage: Usage  #: provider usage (what budgets count)
    budget_stopped: int  #: agents not stepped because the budget ran out
    duration_s: float
    worker_pid: int
    dispatcher_builds: int
    staged: tuple[str, ...] = ()  #: staged shard keys the society commits with the tick
    rolled_back: int = 0  #: agents put back to their journal before stepping again
    transcripts: TranscriptTally = TranscriptTally()  #: what the batch wrote to ``transcripts``
    pack: str | None = None  #: packed runs: the pack holding the batch's agents after the tick
    pack_reads: tuple[str, ...] = ()  #: every pack their files read from
    tier: str = "llm"  #: the tier of the batch's members (llm, archetype or rule)
    calls_by_tier: dict[str, CallSizes] = field(default_factory=dict)  #: its calls' sizes, for the tick's telemetry
