"""Splitting a tick into batch futures, sharing a budget over them, and the run's running totals."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from engine.llm.budget import Allowance, Usage
from engine.society.batch import BatchResult

__all__ = ["MIN_SPREAD", "SocietyTotals", "plan_batches", "split_allowance"]


#: The fewest agents a batch gets when a run is spread over the cluster's task slots: below it a
#: batch's own cost (a task, its workspace reads, a shard per dataset) outweighs a core's CPU.
MIN_SPREAD = 16


def plan_batches(agent_ids: list[int], batch_size: int, slots: int = 1) -> list[tuple[int, ...]]:
    """Split ids into consecutive batches of at most ``batch_size``, sizes within one of each other.

    There are ⌈N / batch_size⌉ of them, or more when the cluster has more task ``slots``: one a slot,
    as long as each keeps :data:`MIN_SPREAD` agents, so a run smaller than ``batch_size`` still uses
    every worker (200 agents on 2 workers x 2 threads: 4 batches of 50, not one of 200).
    """
    n = len(agent_ids)
    if n == 0:
        return []
    parts = max(-(-n // batch_size), min(slots, n // MIN_SPREAD))
    size, extra = divmod(n, parts)
    bounds = [i * size + min(i, extra) for i in range(parts + 1)]
    return [tuple(agent_ids[a:b]) for a, b in itertools.pairwise(bounds)]


def split_allowance(budget: Allowance, used: Usage, parts: int) -> list[Allowance]:
    """Share what remains of ``budget`` after ``used`` evenly over ``parts`` batches."""

    def share(limit: float | None, spent: float, integral: bool) -> list[Any]:
        if limit is None:
            return [None] * parts
        left = max(0.0, limit - spent)
        if integral:
            base, extra = divmod(int(left), parts)
            return [base + (i < extra) for i in range(parts)]
        return [left / parts] * parts

    calls = share(budget.calls, used.calls, True)
    tokens = share(budget.tokens, used.tokens, True)
    cost = share(budget.cost_usd, used.cost_usd, False)
    return [Allowance(calls[i], tokens[i], cost[i]) for i in range(parts)]


@dataclass
class SocietyTotals:
    agent_steps: int = 0
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    env_calls: int = 0
    replayed: int = 0  #: agent-steps a retried batch re-emitted (committed before its worker died)
    rolled_back: int = 0  #: agent-steps undone to their journal and run again
    statuses: dict[str, int] = field(default_factory=dict)
    tick_seconds: list[float] = field(default_factory=list)
    worker_pids: set[int] = field(default_factory=set)
    dispatcher_builds: dict[int, int] = field(default_factory=dict)  #: worker pid -> backends built there (latest)
    dispatcher_builds_first: dict[int, int] = field(default_factory=dict)  #: ... as first seen in this run

    def add(self, result: BatchResult) -> None:
        self.agent_steps += result.agents
        self.add_calls(result.llm_calls, result.input_tokens, result.output_tokens)
        self.env_calls += result.env_calls
        self.replayed += result.replayed
        self.rolled_back += result.rolled_back
        self.worker_pids.add(result.worker_pid)
        self.dispatcher_builds[result.worker_pid] = result.dispatcher_builds
        self.dispatcher_builds_first.setdefault(result.worker_pid, result.dispatcher_builds)
        for status, n in result.statuses.items():
            self.statuses[status] = self.statuses.get(status, 0) + n

    def add_calls(self, llm_calls: int, input_tokens: int, output_tokens: int) -> None:
        """Count agents' LLM calls (a tick batch's, or a questionnaire batch's)."""
        self.llm_calls += llm_calls
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
