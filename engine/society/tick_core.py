"""The tick transaction without I/O: what to do next, given what happened (the model: dask's ``WorkerState``).

A :class:`TickCore` runs one tick of a society as a state machine. Events go in (:class:`Started`,
:class:`BatchesRan`, :class:`EnvEnded`, :class:`Committed`, :class:`EnvLost`, :class:`Restarted`); each
:meth:`TickCore.handle` returns the commands the shell carries out next (:class:`BeginEnv`, :class:`RunBatches`,
:class:`EndEnv`, :class:`Commit`, :class:`Restart`, :class:`Report`, and one ending: :class:`Done` or
:class:`Stop`). The policy lives here: transaction and step numbering, the batch plan (:func:`plan_batches`),
budget shares (:func:`split_allowance`), whether the env steps, recovery after the env actor is lost (at most
:data:`MAX_ENV_RECOVERIES` times), and what the commit records. The shell (:class:`~engine.society.society.AgentSociety`) does the I/O: Dask futures, the env
actor, the run's files. Nothing here imports asyncio, Dask or a file API (``tests/test_layers.py``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from engine.env.control import BeginTick, EndTick
from engine.llm.budget import Allowance, Usage
from engine.run_progress import Phase, RunPhase
from engine.run_status import RunStatus

if TYPE_CHECKING:
    from engine.society.batch import BatchResult

__all__ = [
    "MAX_ENV_RECOVERIES",
    "MIN_SPREAD",
    "SocietyTotals",
    "plan_batches",
    "split_allowance",
    "BatchesRan",
    "BeginEnv",
    "Command",
    "Commit",
    "Committed",
    "Done",
    "EndEnv",
    "EnvEnded",
    "EnvLost",
    "Event",
    "Report",
    "Restart",
    "Restarted",
    "RunBatches",
    "Started",
    "Stop",
    "TickCore",
    "TickPlan",
    "TickState",
]

#: how often one transaction may lose its env actor before the run fails
MAX_ENV_RECOVERIES = 3


@dataclass(frozen=True)
class TickState:
    """Where the run stands: the committed status's fields a tick reads and advances."""

    txn: int  #: transactions committed
    step_count: int  #: ticks committed
    current_time: datetime
    agent_steps_done: int = 0
    env_snapshot: str | None = None  #: the env state the last commit holds (what a lost actor restarts from)


@dataclass(frozen=True)
class TickPlan:
    """One attempt of a tick: its transaction, its batches and their budget shares."""

    txn: int
    step: int  #: the society step (1-based) this tick is
    tick: int  #: seconds of simulated time
    t_end: datetime
    attempt: str  #: unique per attempt; batches of another attempt are rolled back
    batches: tuple[tuple[int, ...], ...]  #: agent ids per batch
    allowances: tuple[Allowance | None, ...]  #: each batch's budget share (None: unlimited)


# ---- the batch plan, budget shares, totals ---------------------------------------------------------------
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


# ---- events --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Started:
    """A tick is requested: ``slots`` batch futures can run at once now; ``usage`` is spent so far."""

    slots: int
    attempt: str
    usage: Usage | None = None


@dataclass(frozen=True)
class Restarted(Started):
    """A new env actor runs from the committed snapshot; the tick is attempted again."""


@dataclass(frozen=True)
class BatchesRan:
    """Every batch of the attempt ended: agent-steps stepped, and how many the budget stopped."""

    agents: int
    budget_stopped: int


@dataclass(frozen=True)
class EnvEnded:
    """The env actor's answer to :class:`EndEnv`: router calls the budget refused, its snapshot if it stepped."""

    refused: int
    snapshot: str | None


@dataclass(frozen=True)
class Committed:
    """The commit point is written: the tick is done."""


@dataclass(frozen=True)
class EnvLost:
    """The env actor was lost (its worker died) at any point of the attempt."""

    error: str


Event = Started | BatchesRan | EnvEnded | Committed | EnvLost


# ---- commands ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Report:
    phase: Phase


@dataclass(frozen=True)
class BeginEnv:
    begin: BeginTick


@dataclass(frozen=True)
class RunBatches:
    plan: TickPlan


@dataclass(frozen=True)
class EndEnv:
    end: EndTick


@dataclass(frozen=True)
class Commit:
    """Commit the attempt's staged files with ``state``, the status after the tick."""

    state: TickState
    plan: TickPlan


@dataclass(frozen=True)
class Restart:
    """Drop what the attempt staged and start a new env actor from ``snapshot``; answer with :class:`Restarted`."""

    snapshot: str | None


@dataclass(frozen=True)
class Done:
    """The tick committed."""

    state: TickState


@dataclass(frozen=True)
class Stop:
    """The tick ends without a commit: the run is to stand at ``status`` (None: unchanged), and fail with ``error``."""

    status: RunStatus | None
    status_error: str | None
    error: str
    budget: bool = False  #: the budget stopped it (a resumed run with more budget re-runs the tick)


Command = Report | BeginEnv | RunBatches | EndEnv | Commit | Restart | Done | Stop


@dataclass
class TickCore:
    """One tick of a society, from its request to its commit or its stop.

    Args:
        state: where the run stands (a resumed run: as its committed status has it).
        tick: the tick's length in seconds.
        agent_ids: every agent, in id order.
        batch_size: agents per batch, at most (:func:`plan_batches`).
        run_id: what every staged row carries.
        budget: the run's budget (None: unlimited).
        fixed: the archetype and rule tiers' batches (agent ids each), the same every tick; they follow the
            LLM agents' batches, and ``agent_ids`` holds only the LLM agents.
    """

    state: TickState
    tick: int
    agent_ids: tuple[int, ...]
    batch_size: int
    run_id: str
    budget: Allowance | None = None
    fixed: tuple[tuple[int, ...], ...] = ()
    recoveries: int = 0  #: env actors replaced so far in this tick
    plan: TickPlan | None = field(default=None, init=False)
    _stopped: int = field(default=0, init=False)
    _agents: int = field(default=0, init=False)
    _after: TickState | None = field(default=None, init=False)  #: the status the commit records

    def handle(self, event: Event) -> list[Command]:
        """The commands ``event`` calls for, in order."""
        if isinstance(event, Started):
            return self._start(event)
        if isinstance(event, EnvLost):
            return self._lost(event)
        plan = self.plan
        assert plan is not None, f"{type(event).__name__} before Started"
        if isinstance(event, BatchesRan):
            self._agents, self._stopped = event.agents, event.budget_stopped
            end = EndTick(plan.step, plan.tick, plan.t_end, plan.txn, self.run_id, stopped=event.budget_stopped)
            return [Report(Phase(RunPhase.COMMITTING)), EndEnv(end)]
        if isinstance(event, EnvEnded):
            return self._ended(plan, event)
        assert self._after is not None, "Committed before Commit"
        return [Done(self._after)]

    def _start(self, event: Started) -> list[Command]:
        txn, step = self.state.txn + 1, self.state.step_count + 1
        batches = plan_batches(list(self.agent_ids), self.batch_size, event.slots) + list(self.fixed)
        if self.budget is None:
            shares: list[Allowance | None] = [None] * len(batches)
            router: Allowance | None = None
        else:
            assert event.usage is not None, "a budgeted tick needs the usage so far"
            *held, router = split_allowance(self.budget, event.usage, len(batches) + 1)
            shares = [*held]
        t_end = self.state.current_time + timedelta(seconds=self.tick)
        self.plan = TickPlan(txn, step, self.tick, t_end, event.attempt, tuple(batches), tuple(shares))
        return [Report(Phase(RunPhase.TICK)), BeginEnv(BeginTick(self.state.current_time, router)), RunBatches(self.plan)]

    def _ended(self, plan: TickPlan, event: EnvEnded) -> list[Command]:
        if self._stopped or event.refused:
            waiting = f"{self._stopped} agent-steps and {event.refused} router calls of step {plan.step} wait for more budget"
            return [Stop(RunStatus.BUDGET_EXHAUSTED, waiting, f"budget exhausted during step {plan.step}: {self._stopped} "
                         f"agent-steps not run, {event.refused} router calls refused", budget=True)]
        snapshot = event.snapshot if event.snapshot is not None else self.state.env_snapshot
        self._after = TickState(plan.txn, plan.step, plan.t_end, self.state.agent_steps_done + self._agents, snapshot)
        return [Commit(self._after, plan)]

    def _lost(self, event: EnvLost) -> list[Command]:
        if self.recoveries == MAX_ENV_RECOVERIES:
            return [Stop(None, None, f"the env actor was lost {self.recoveries + 1} times in one transaction: {event.error}")]
        self.recoveries += 1
        self.plan, self._stopped, self._agents = None, 0, 0
        return [Restart(self.state.env_snapshot)]
