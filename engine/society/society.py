"""AgentSociety: the record-based orchestrator. It holds agent specs and ids, never agent objects.

Every tick and every non-run top-level step (questionnaire, ask, intervene) is a transaction: per tick, ids are split
into batches, one ``step_agent_batch`` future per batch (at most ``max_workers`` in flight), then the env step stages
its rows and a state snapshot, :func:`engine.society.transaction.commit` makes it all visible at once, and a ``tick``
span records its wall time. A tick failing before its commit (killed driver, lost env actor, exhausted budget) re-runs
from the state before it: agents roll back to their journals, the env restores its last snapshot, staged files go.
A tick's policy is :class:`~engine.society.tick_core.TickCore`, without I/O; this class carries out its commands.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from engine.agent.service_proxy import ServiceProxy
from engine.env.control import BeginTick, EndConsult, TickEnd
from engine.errors import BudgetExhaustedError, EnvUnavailableError, RunError
from engine.failpoints import failpoint
from engine.llm.budget import Allowance, BudgetGate, Usage
from engine.llm.client import LLMClient
from engine.llm.dispatcher import flush_response_caches
from engine.llm.meter import CallRecord
from engine.run_progress import Phase, RunPhase
from engine.run_status import RunStatus
from engine.society.batch import BatchResult, run_tick_batches
from engine.society.datasets import ACTIONS, AGENT_MEMORY, LLM_CALLS, SOCIETY_QUERIES, TRANSCRIPTS
from engine.society.experimenter.consult import consult_scope, run_helper
from engine.society.experimenter.interview import ask_agents
from engine.society.fork.as_of import AsOf, AsOfAgents, find_as_of, start_as_of_env
from engine.society.history import TICK, KeptTicks
from engine.society.questionnaire.batch import QuestionnaireBatchResult, distribute_questionnaire
from engine.society.run.live_calls import LiveCalls
from engine.society.shells.base import EnvHost, Shell
from engine.society.status import SocietyStep, read_society, read_society_step, write_society, write_society_step
from engine.society.tick_core import (
    MAX_ENV_RECOVERIES,
    BatchesRan,
    BeginEnv,
    Commit,
    Committed,
    EndEnv,
    EnvEnded,
    EnvLost,
    Report,
    Restart,
    Restarted,
    RunBatches,
    SocietyTotals,
    Started,
    Stop,
    TickCore,
    TickPlan,
    TickState,
    plan_batches,
    split_allowance,
)
from engine.society.tiered.batch import started_prefix
from engine.society.tiered.telemetry import TOKEN_TELEMETRY, merge_sizes, sizes_by_tier, telemetry_rows
from engine.society.transaction import commit, recover
from engine.society.transcripts import TranscriptLedger, stage_router_calls
from engine.society.workspaces.common import BatchJob
from engine.society.workspaces.journaled import FolderAgents
from engine.society.workspaces.manifest import PACKED, AgentSource, PackedAgents
from engine.spec import StorageSpec
from engine.storage.catalog import Catalog
from engine.storage.replay import ReplayWriter
from engine.storage.run_layout import REPLAY_DIR, RunLocation, as_location, run_store
from engine.storage.shards import shard_name
from engine.tiers.datasets import AGENT_STATE, ARCHETYPE_DECISIONS
from engine.tiers.plan import TierBatch
from engine.trace import write_tick_span

__all__ = ["AgentSociety", "SocietyTotals", "plan_batches", "split_allowance"]

T = TypeVar("T")



class AgentSociety:
    """Drive agents (as workspace records) and the environment (through its actor) tick by tick.

    Use as ``async with society:`` (``init`` / ``close``), or call them yourself.

    Args:
        agent_specs: ``{"id", "type", "profile", "config"}`` per agent.
        env: the host of the env router actor.
        llm: LLM clients by role (``default``, ``coder``).
        start_t: simulated start time.
        run_dir: the run directory (``agents/`` holds the workspaces).
        shell: where the batch jobs run (:mod:`engine.society.shells`: a Dask cluster or this process).
        run_id: names replay rows and ends task keys (:func:`~engine.society.run.dashboard.task_key`).
        batch_size: agents per batch future, at most (:func:`~engine.society.tick_core.plan_batches`).
        max_workers: batch futures in flight at once (None: all).
        budget: the run's budget (None: unlimited).
        on_batch: called after each batch completes (progress reporting).
        on_phase: called (on the event loop) as the society enters a phase or counts one's items: workspaces
            created, a tick starting, questionnaire and interview answers, the commit (progress reporting).
        live: where the batches' live counts are folded while they run (:mod:`engine.society.run.live_calls`;
            the caller listens for them); None: batches publish none.
        status: where a resumed run stands (None: a fresh start at ``start_t``).
        session: the driver's lease session (batch tasks of another session refuse to write).
        info: what else ``SOCIETY.json`` records next to the agent specs (the spec, its hash, env
            modules, LLM settings); it is written once, by the first :meth:`init`.
        transcript_bytes: the run's cap on transcript text (None: no ``transcripts`` dataset).
        snapshots_keep: the spec's ``snapshots.keep`` (:mod:`engine.society.history`).
        storage: where the agents' workspaces are kept (packs, the default, or a folder each).
        tiers: the archetype and rule members' fixed batches (:mod:`engine.tiers.plan`); ``agent_specs`` then
            holds only the LLM agents.
    """

    def __init__(
        self,
        agent_specs: list[dict[str, Any]],
        *,
        env: EnvHost,
        llm: dict[str, LLMClient],
        start_t: datetime,
        run_dir: RunLocation,
        shell: Shell,
        run_id: str,
        batch_size: int = 256,
        max_workers: int | None = None,
        budget: Allowance | None = None,
        on_batch: Callable[[BatchResult], None] | None = None,
        on_phase: Callable[[Phase], None] | None = None,
        live: LiveCalls | None = None,
        status: SocietyStep | None = None,
        session: str | None = None,
        info: dict[str, Any] | None = None,
        transcript_bytes: int | None = None,
        snapshots_keep: int | None = None,
        storage: StorageSpec | None = None,
        tiers: Sequence[TierBatch] = (),
    ) -> None:
        self._specs = agent_specs
        self._tiers = tuple(tiers)
        self._info = info or {}
        self._session = session
        self._env, self._llm = env, llm
        self._run_dir = as_location(run_dir)
        self._shell = shell
        self.run_id = run_id
        self._batch_size = batch_size
        self._max_workers = max_workers
        self._budget = budget
        self._on_batch = on_batch
        self._on_phase = on_phase
        self._live = live
        self._status = status or SocietyStep(current_time=start_t)
        self.usage = Usage(**self._status.extra.get("usage", {}))
        #: text bytes committed so far live in the status, so a resumed run continues the count
        self.transcripts = TranscriptLedger.restore(transcript_bytes, self._status.extra.get("transcripts"))
        self.totals = SocietyTotals()
        self.last_telemetry: list[dict[str, Any]] = []  #: the last tick's token_telemetry rows (engine.society.tiered.telemetry)
        self.env_recoveries = 0
        self.snapshots_keep, self._kept = snapshots_keep, KeptTicks(snapshots_keep)  # _kept: loaded by init
        self.storage = storage or StorageSpec()
        self._agents_at: PackedAgents | FolderAgents = (PackedAgents(self._run_dir, snapshots_keep) if self.storage.workspaces == PACKED
                                                         else FolderAgents(Path(self._run_dir), snapshots_keep))

    @classmethod
    async def from_workspace(cls, run_dir: RunLocation, **options: Any) -> AgentSociety:
        """Rebuild a society to resume the run in ``run_dir`` (``options`` as for the constructor,
        without ``agent_specs``, ``start_t`` and ``status``). Staged files of the transaction that was
        running when the run stopped are deleted; committed ones are published.

        Raises:
            RunError: ``run_dir`` holds no run.
        """
        run_dir = as_location(run_dir)
        stored = read_society(run_dir)
        status = read_society_step(run_dir)
        if stored is None or status is None:
            raise RunError(f"{run_dir} holds no run to resume (SOCIETY.json / SOCIETY_STEP.json missing)")
        recover(run_dir, status)
        return cls(stored["agent_specs"], start_t=status.current_time, run_dir=run_dir, status=status, **options)

    # ---- what it is ----------------------------------------------------------------------------
    @property
    def current_time(self) -> datetime:
        return self._status.current_time

    @property
    def step_count(self) -> int:
        return self._status.step_count

    @property
    def completed_steps(self) -> int:
        return self._status.completed_steps

    @property
    def txn(self) -> int:
        """Transactions committed so far."""
        return self._status.txn

    @property
    def agent_ids(self) -> list[int]:
        return [int(s["id"]) for s in self._specs]

    @property
    def agent_specs(self) -> list[dict[str, Any]]:
        return [dict(s) for s in self._specs]

    @property
    def run_dir(self) -> Path | str:
        return self._run_dir

    @property
    def proxy(self) -> ServiceProxy:
        """What tasks receive: the current env actor's proxy, the LLM clients, the run directory."""
        return ServiceProxy(env=self._env.live_proxy, llm=self._llm, run_dir=self._run_dir, run_id=self.run_id)

    # ---- lifecycle -----------------------------------------------------------------------------
    async def init(self) -> None:
        """Write ``SOCIETY.json`` (once), create every agent workspace (skipping ones that exist), start
        the env actor from the last committed snapshot, and mark the run running."""
        write_society(self._run_dir, {**self._info, "agent_specs": self._specs})
        catalog = Catalog(run_store(self._run_dir).child(REPLAY_DIR))
        tiered = (AGENT_STATE, ARCHETYPE_DECISIONS) if self._tiers else ()
        for schema in (ACTIONS, AGENT_MEMORY, LLM_CALLS, TRANSCRIPTS, SOCIETY_QUERIES, TOKEN_TELEMETRY, *tiered,
                       *self._env.replay_datasets()):
            catalog.register(schema)
        self._kept.load(self._run_dir, self._status.txn)
        # A fresh packed run (or one stopped while creating them) creates its agents' packs; a dir run, missing folders.
        loop, total = asyncio.get_running_loop(), len(self._specs)

        def created(done: int) -> None:  # on the thread that creates them
            loop.call_soon_threadsafe(self._phase, Phase(RunPhase.CREATING_WORKSPACES, done, total))

        self._status.workspaces = await asyncio.to_thread(self._agents_at.open, self._status.workspaces, self._specs,
                                                          txn=self._status.txn, batch_size=self._batch_size, on_created=created)
        self._phase(Phase(RunPhase.STARTING_ENV))
        await self._env.start(self._status.env_snapshot, split_allowance(self._budget, self.usage, 1)[0] if self._budget else None)
        self.set_status(RunStatus.RUNNING)

    async def close(self) -> None:
        await self._env.release()

    def _phase(self, phase: Phase) -> None:
        if self._on_phase is not None:
            self._on_phase(phase)

    async def forget_journals(self) -> None:
        """Drop the agents' step journals of committed ticks that ``snapshots_keep`` does not keep."""
        await asyncio.to_thread(self._agents_at.forget, self.agent_ids, self.step_count)

    async def __aenter__(self) -> AgentSociety:
        await self.init()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _stamp(self) -> SocietyStep:
        self._status.updated_at = time.time()
        self._status.extra["usage"] = {"calls": self.usage.calls, "tokens": self.usage.tokens, "cost_usd": self.usage.cost_usd}
        self._status.extra["transcripts"] = self.transcripts.state()
        return self._status

    async def to_workspace(self) -> None:
        """Persist the small status record (env state is snapshotted by every commit)."""
        write_society_step(self._run_dir, self._stamp())

    def mark_step_completed(self, step_idx: int) -> None:
        """Record that top-level spec step ``step_idx`` (0-based) finished."""
        self._status.completed_steps = step_idx + 1
        write_society_step(self._run_dir, self._stamp())

    def set_status(self, status: RunStatus, error: str | None = None) -> None:
        self._status.status, self._status.error = status, error
        write_society_step(self._run_dir, self._stamp())

    def _commit(self, staged: list[str], *, step_index: int | None = None, env_snapshot: str | None = None,
                kind: str = "step") -> None:
        self._status.txn += 1
        if env_snapshot is not None:
            self._status.env_snapshot = env_snapshot
        if step_index is not None:
            self._status.completed_steps = step_index + 1
        self.transcripts.commit()
        flush_response_caches()  # answers the driver's own calls (helper, interviews) used
        status = self._stamp()
        commit(self._run_dir, status, staged, kind=kind, keep_snapshots=self._kept.protected(status, kind))

    async def _with_env_recovery(self, attempt: Callable[[], Awaitable[T]]) -> T:
        """Run one transaction; when the env actor is lost, start a new one from the last committed
        snapshot, drop what the failed attempt staged, and run the transaction again."""
        for recoveries in range(MAX_ENV_RECOVERIES + 1):
            try:
                return await attempt()
            except EnvUnavailableError as error:
                if recoveries == MAX_ENV_RECOVERIES:
                    raise RunError(f"the env actor was lost {recoveries + 1} times in one transaction: {error}") from error
                self.env_recoveries += 1
                recover(self._run_dir, self._status)
                await self._env.restart(self._status.env_snapshot)
        raise AssertionError("unreachable")

    # ---- ticks ---------------------------------------------------------------------------------
    async def step(self, tick: int) -> list[BatchResult]:
        """One tick (a transaction): batches of agents, then the env step, then the commit.

        Raises:
            BudgetExhaustedError: the budget ran out during the tick; nothing of it is committed and a
                resumed run re-runs it (agents that finished it hit the response cache).
        """
        started, started_unix_ms = time.perf_counter(), time.time() * 1000
        results = await self._tick(tick)
        self.totals.tick_seconds.append(time.perf_counter() - started)  # recoveries included
        write_tick_span(self._run_dir, self._status.step_count, started_unix_ms, self.totals.tick_seconds[-1])
        return results

    async def run(self, num_steps: int, tick: int) -> None:
        for _ in range(num_steps):
            await self.step(tick)

    async def _tick(self, tick: int) -> list[BatchResult]:
        """Carry out what the tick's :class:`~engine.society.tick_core.TickCore` commands, feeding back what happened."""
        status = self._status
        core = TickCore(TickState(status.txn, status.step_count, status.current_time, status.agent_steps_done, status.env_snapshot),
                        tick, tuple(self.agent_ids), self._batch_size, self.run_id, self._budget,
                        tuple(batch.agent_ids for batch in self._tiers))
        commands = core.handle(Started(await self._shell.slots(self._max_workers), uuid.uuid4().hex, self.usage))
        results: list[BatchResult] = []
        jobs: list[BatchJob] = []
        staged: list[str] = []
        while commands:
            command = commands.pop(0)
            try:
                if isinstance(command, Report):
                    self._phase(command.phase)
                elif isinstance(command, BeginEnv):
                    await self._env.begin_tick(command.begin)
                elif isinstance(command, RunBatches):
                    jobs = self._jobs(command.plan)
                    results = await self._run_batches(jobs)
                    commands += core.handle(BatchesRan(sum(r.agents for r in results), sum(r.budget_stopped for r in results)))
                elif isinstance(command, EndEnv):
                    env = await self._env.end_tick(command.end)  # the env steps only when the budget stopped and refused nothing
                    staged = [path for r in results for path in r.staged] + list(env.staged)
                    staged += self._stage_router_calls(env, command.end.step, command.end.txn, "tick")
                    staged += self._stage_telemetry(results, env, command.end.step, command.end.txn)
                    commands += core.handle(EnvEnded(env.refused, env.snapshot))
                elif isinstance(command, Commit):
                    self._commit_tick(command.state, jobs, results, staged)
                    commands += core.handle(Committed())
                elif isinstance(command, Restart):
                    self.env_recoveries += 1
                    recover(self._run_dir, self._status)
                    await self._env.restart(command.snapshot)
                    commands += core.handle(Restarted(await self._shell.slots(self._max_workers), uuid.uuid4().hex, self.usage))
                elif isinstance(command, Stop):
                    if command.status is not None:
                        self.set_status(command.status, command.status_error)
                    raise BudgetExhaustedError(command.error) if command.budget else RunError(command.error)
            except EnvUnavailableError as error:
                if isinstance(command, Restart):
                    raise
                commands = core.handle(EnvLost(str(error)))  # what the lost attempt had left to do is void
        return results

    def _jobs(self, plan: TickPlan) -> list[BatchJob]:
        """The batch futures' jobs of one attempt."""
        texts = self.transcripts.open(len(plan.batches))
        proxy = self.proxy
        scope = self._live.open() if self._live is not None else None
        first_tier = len(plan.batches) - len(self._tiers)  # the tiers' fixed batches come last
        return [BatchJob(ids, plan.step, i, plan.tick, plan.t_end, proxy, plan.allowances[i], plan.txn, plan.attempt, self._session,
                         texts[i], self.snapshots_keep, self._agents_at.packs_of(ids) if i < first_tier else None,
                         self.storage.checkpoint_every, scope, self._tiers[i - first_tier] if i >= first_tier else None)
                for i, ids in enumerate(plan.batches)]

    def _commit_tick(self, state: TickState, jobs: list[BatchJob], results: list[BatchResult], staged: list[str]) -> None:
        self._status.current_time, self._status.step_count = state.current_time, state.step_count
        self._status.agent_steps_done = state.agent_steps_done
        by_batch = {r.batch: r for r in results}
        self._status.workspaces = self._agents_at.stage(state.txn, ((by_batch[j.batch].pack, j.agent_ids, by_batch[j.batch].pack_reads)
                                                                    for j in jobs if j.tiers is None))
        self._commit(staged, env_snapshot=state.env_snapshot, kind=TICK)
        assert self._status.txn == state.txn
        if self._tiers:  # the tier batches' start markers: the committed tick is not retried
            run_store(self._run_dir).delete_prefix(started_prefix(state.txn))

    def _share_budget(self, holders: int) -> tuple[list[Allowance | None], Allowance | None]:
        """Share what remains of the budget over ``holders`` and the env router, whose share (the last; its calls
        serve every holder's env requests) its :class:`BeginTick` carries: together they cannot overspend."""
        if self._budget is None:
            return [None] * holders, None  # the router's gate stays as the actor starts: unlimited
        *shares, router = split_allowance(self._budget, self.usage, holders + 1)
        return [*shares], router  # a list of Allowance | None (the list itself is invariant)

    def _stage_telemetry(self, results: list[BatchResult], end: TickEnd, step: int, txn: int) -> list[str]:
        """Stage the tick's ``token_telemetry`` rows (its batches' and the router's calls, by tier), and keep them as
        :attr:`last_telemetry` for the progress reports."""
        sizes = merge_sizes([*(r.calls_by_tier for r in results), sizes_by_tier(r.as_row() for r in end.records)])
        members: dict[str, int] = {}
        for result in results:
            members[result.tier] = members.get(result.tier, 0) + result.agents
        self.last_telemetry = telemetry_rows(self.run_id, step, sizes, members)
        key = ReplayWriter(self._run_dir, txn).write_shard(TOKEN_TELEMETRY, shard_name(step, "telemetry"), self.last_telemetry)
        return [key] if key is not None else []

    def _stage_router_calls(self, end: TickEnd, step: int, txn: int, scope: str) -> list[str]:
        """Stage the env router's LLM call rows ``end`` drained in this transaction (call ids in ``scope``) and count
        their provider usage; returns the staged paths."""
        staged, usage = stage_router_calls(end.records, self._run_dir, self.run_id, step=step, txn=txn, scope=scope, ledger=self.transcripts)
        self.usage.add(usage)
        return staged

    async def _run_batches(self, jobs: list[BatchJob]) -> list[BatchResult]:
        def on_result(result: BatchResult) -> None:
            self.totals.add(result)
            self.usage.add(result.usage)
            self.transcripts.add(result.transcripts)
            if self._live is not None:
                self._live.finished(result.batch)  # before on_batch reports: the result replaces the live estimate
            if self._on_batch is not None:
                self._on_batch(result)
            failpoint("between_batches", step=result.step)

        try:
            return await run_tick_batches(self._shell, jobs, self._env, self.run_id, limit=self._max_workers, on_result=on_result)
        finally:
            if self._live is not None:
                self._live.close()  # a failed attempt's batches in flight count no more

    # ---- questionnaires, ask, intervene ------------------------------------------------------------
    async def run_questionnaire(self, questionnaire: Any, target_agent_ids: list[int] | None = None, *,
                                step_index: int | None = None, as_of_step: int | None = None) -> Any:
        """Give ``questionnaire`` to the target agents (default: all) in batches on the cluster, as one
        transaction; answers land in ``questionnaire_answers`` and under ``artifacts/``. With ``as_of_step``
        K they answer as tick K left them (:mod:`engine.society.fork.as_of`)."""
        ids = self.agent_ids if target_agent_ids is None else list(target_agent_ids)
        if unknown := sorted(set(ids) - set(self.agent_ids)):
            raise RunError(f"questionnaire {questionnaire.questionnaire_id}: unknown target agent ids {unknown[:10]}")
        index, txn = self.completed_steps if step_index is None else step_index, self._status.txn + 1
        at = self._as_of(as_of_step, ids, index)
        answers = Phase(RunPhase.QUESTIONNAIRE, 0, len(ids) * len(questionnaire.questions))
        self._phase(answers)

        def on_batch(result: QuestionnaireBatchResult) -> None:
            nonlocal answers
            self.usage.add(result.usage)
            self.totals.add_calls(result.llm_calls, result.input_tokens, result.output_tokens)
            answers = Phase(answers.name, (answers.done or 0) + len(result.answers), answers.total)
            self._phase(answers)

        with AsOfAgents(self._run_dir, at, txn) if at is not None else contextlib.nullcontext() as as_of:
            response, staged = await distribute_questionnaire(
                self._shell, questionnaire, ids, proxy=self.proxy, txn=txn, step_count=self.step_count, step_index=index,
                t=at.t if at is not None else self.current_time, batch_size=self._batch_size, max_workers=self._max_workers,
                budget=self.remaining_budget(), session=self._session, on_batch=on_batch,
                transcripts=self.transcripts, agents=await self._agents(ids, as_of), as_of_step=as_of_step, live=self._live,
            )
        self._phase(Phase(RunPhase.COMMITTING))
        self._commit(staged, step_index=step_index)
        return response

    def _as_of(self, as_of_step: int | None, agent_ids: list[int], step_index: int) -> AsOf | None:
        return None if as_of_step is None else find_as_of(self._run_dir, as_of_step, ticks_done=self.step_count,
                                                           through_txn=self._status.txn, agent_ids=agent_ids, step_index=step_index)

    def remaining_budget(self) -> Allowance | None:
        """What is left of the run's budget (None: unlimited)."""
        return split_allowance(self._budget, self.usage, 1)[0] if self._budget is not None else None

    async def ask_agents(self, agent_ids: list[int], question: str, *, records: list[CallRecord] | None = None,
                         budget: BudgetGate | None = None, as_of: AsOfAgents | None = None) -> dict[int, str]:
        """Interview chosen agents in this process (read-only: their workspaces are not changed).
        ``records`` collects their LLM calls; ``budget`` charges them; ``as_of``: as a kept tick left them."""
        t = as_of.at.t if as_of is not None else self.current_time
        asked = len(set(agent_ids))
        answered = 0
        self._phase(Phase(RunPhase.INTERVIEW, answered, asked))

        def on_answer() -> None:
            nonlocal answered
            answered += 1
            self._phase(Phase(RunPhase.INTERVIEW, answered, asked))

        return await ask_agents(self._run_dir, self.proxy, list(agent_ids), question, t, records=records, budget=budget,
                                agents=await self._agents(list(agent_ids), as_of), on_answer=on_answer)

    async def _agents(self, agent_ids: list[int], as_of: AsOfAgents | None) -> AgentSource | None:
        """Where readers find the agents: copies of a kept tick, the run's packs, or (None) its folders."""
        if as_of is not None:
            return await asyncio.to_thread(as_of.source, agent_ids)
        return self._agents_at.source(agent_ids)

    async def ask(self, question: str, *, step_index: int | None = None, as_of_step: int | None = None) -> str:
        """Answer a question about the simulation (the plan-and-execute helper; read-only); as tick K left it with ``as_of_step`` K."""
        return (await self._consult("ask", question, step_index, as_of_step)).reply

    async def intervene(self, instruction: str, *, step_index: int | None = None,
                        calls: list[tuple[str, dict[str, Any]]] | None = None) -> str:
        """Carry out an intervention: the helper plans it from ``instruction`` (it may change env state and message
        agents), or makes ``calls``, env tool calls (tool, arguments), as written."""
        return (await self._consult("intervene", instruction, step_index, calls=calls)).reply

    async def _consult(self, kind: str, text: str, step_index: int | None, as_of_step: int | None = None, *,
                       calls: list[tuple[str, dict[str, Any]]] | None = None) -> Any:
        at = self._as_of(as_of_step, self.agent_ids, self.completed_steps if step_index is None else step_index)

        async def attempt() -> Any:
            self._phase(Phase(RunPhase.ASK if kind == "ask" else RunPhase.INTERVENE))
            txn = self._status.txn + 1
            with AsOfAgents(self._run_dir, at, txn) if at is not None else contextlib.nullcontext() as as_of:
                env = await start_as_of_env(self._env, as_of) if as_of is not None else self._env
                try:  # an as-of ask reads a second env actor, the env as the tick left it
                    (allowance,), router = self._share_budget(1)
                    await env.begin_tick(BeginTick(None, router))
                    result, staged, usage = await run_helper(self, kind, text, txn=txn, step_index=step_index, calls=calls,
                                                             allowance=allowance, as_of=as_of, env=env)
                    self.usage.add(usage)
                    # an intervention settles its queued updates and snapshots the env, unless the budget refused a call
                    end = await env.end_consult(EndConsult(txn, settle=kind == "intervene"))
                finally:
                    if env is not self._env:
                        await env.release()
            staged += self._stage_router_calls(end, self.step_count, txn, consult_scope(kind, self, step_index))
            if end.refused:
                raise BudgetExhaustedError(f"budget exhausted during the {kind} step: {end.refused} router calls refused")
            self._phase(Phase(RunPhase.COMMITTING))
            self._commit(staged, step_index=step_index, env_snapshot=end.snapshot)
            return result

        return await self._with_env_recovery(attempt)

    # ---- used by the helper -------------------------------------------------------------------------
    @property
    def env(self) -> EnvHost:
        return self._env
