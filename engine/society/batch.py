"""step_agent_batch: the Dask task that steps one batch of agents for one tick (``run_tick_batches`` fans them out).

It is an ``async def`` so Dask runs it on the worker's event loop, where awaiting the env actor
works. Each agent is rebuilt from its workspace, stepped, and written back; a failing agent is
recorded with its error and the rest of the batch continues.

Exactly once per (agent, step): before an agent steps, a :class:`StepJournal` records its workspace.
An agent that already committed this step *in this attempt of the tick* (Dask retried the task after
its worker died; the env actor still holds the agent's queued updates) re-emits its recorded rows.
Any other journalled agent (died mid-step, or the tick is being re-run on restored env state) is
rolled back to the journal and its queued env updates are dropped before it steps again. Shards are
staged in the tick's transaction and appear only when the society commits it.

Beside ``actions`` and ``llm_calls`` a batch writes ``transcripts`` (the calls' text, up to the batch's
share of the run's cap) and ``agent_memory`` (each agent's memory at the end of its step). The
replay record of a step keeps its call rows without their text; the text waits in the workspace's
``.runtime/logs/step_texts.json`` (the last step's only, so it does not pile up), to be re-emitted
with the record by a retried batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from distributed import Client

from engine.agent.base import AgentBase
from engine.agent.journal import StepJournal
from engine.agent.memory.snapshot import episodes_offset, memory_snapshot
from engine.agent.registry import resolve_agent
from engine.agent.service_proxy import ServiceProxy
from engine.agent.workspace import DirWorkspace, workspace_path
from engine.errors import BudgetExhaustedError, EnvUnavailableError, PolisError, RunError, StaleRunError
from engine.failpoints import failpoint
from engine.llm.budget import Allowance, BudgetGate, Usage
from engine.llm.dispatcher import dispatcher_stats
from engine.llm.meter import serving_agent
from engine.society.datasets import ACTIONS, AGENT_MEMORY
from engine.society.fanout import fan_out
from engine.society.history import journals_to_discard
from engine.society.lease import check_session
from engine.society.run.dashboard import AGENTS, task_key
from engine.society.transcripts import TEXT_KEYS, TranscriptTally, call_rows, write_call_shards
from engine.storage.run_layout import RunLayout
from engine.storage.shards import shard_name
from engine.trace import TraceRecorder

if TYPE_CHECKING:
    from engine.society.env_host import EnvHost

__all__ = ["BatchJob", "BatchResult", "run_tick_batches", "step_agent_batch"]


@dataclass(frozen=True)
class BatchJob:
    """One batch of one tick."""

    agent_ids: tuple[int, ...]
    step: int  #: 1-based society step being run
    batch: int
    tick: int
    t: datetime  #: simulated time at the end of the step
    proxy: ServiceProxy
    allowance: Allowance | None = None  #: this batch's share of the remaining budget
    txn: int = 1  #: the society transaction this tick commits as
    attempt: str = ""  #: this attempt of the tick; commits from other attempts are rolled back
    session: str | None = None  #: the driver's lease session; a task of an older session writes nothing
    text_allowance: int | None = None  #: transcript text bytes this batch may keep; None: no transcripts
    snapshots_keep: int | None = 0  #: past ticks whose journals stay (the spec's ``snapshots.keep``; None: all)


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
    staged: tuple[str, ...] = ()  #: staged shard paths the society commits with the tick
    rolled_back: int = 0  #: agents put back to their journal before stepping again
    transcripts: TranscriptTally = TranscriptTally()  #: what the batch wrote to ``transcripts``


#: Where an agent-step's call texts wait for a retried batch (see the module docstring).
_TEXTS = ".runtime/logs/step_texts.json"

_ISOLATED = (PolisError, OSError, ValueError, KeyError, TypeError, AttributeError, LookupError)


def _usage_columns(agent: AgentBase | None) -> dict[str, Any]:
    meter = agent.meter if agent is not None else None
    return {
        "llm_calls": meter.calls if meter else 0,
        "llm_failures": meter.failures if meter else 0,
        "input_tokens": meter.input_tokens if meter else 0,
        "output_tokens": meter.output_tokens if meter else 0,
        "llm_latency_ms": meter.latency_ms if meter else 0.0,
        "cost_usd": meter.cost_usd if meter else 0.0,
    }


async def _undo_failed_step(agent_id: int, job: BatchJob, agents_root: Path) -> None:
    journal = StepJournal(workspace_path(agents_root, agent_id))
    if journal.has(job.step):
        with contextlib.suppress(PolisError, OSError):
            journal.rollback(job.step)
            await job.proxy.env.discard_pending(agent_id)


async def _step_one(
    agent_id: int, job: BatchJob, proxy: ServiceProxy, agents_root: Path, recorder: TraceRecorder, gate: BudgetGate | None
) -> dict[str, Any] | None:
    """Step one agent; returns ``{"row", "calls"}``, or None when the budget stopped it.

    ``proxy`` is the task's (:meth:`ServiceProxy.for_task`); ``recorder`` is its trace recorder.
    """
    started = time.perf_counter()
    serving_agent.set(agent_id)  # this coroutine runs as its own task: the setting stays with this agent
    row: dict[str, Any] = {"run": job.proxy.run_id, "agent_id": agent_id, "step": job.step, "t": job.t, "agent_type": None}
    agent: AgentBase | None = None
    rolled_back = False
    ws = workspace_path(agents_root, agent_id)
    episodes_from: int | None = None  #: where this step's episodes start (after any rollback)
    with recorder.span("agent.step", agent_id=agent_id, step=job.step) as span:
        try:
            cls = resolve_agent(DirWorkspace(ws).read_json("config.json")["type"])
            row["agent_type"] = cls.__name__
            journal = StepJournal(ws)
            through = journals_to_discard(job.step, job.snapshots_keep)  # earlier ticks are committed
            if through is not None:
                journal.discard_through(through)
            agent = await cls.from_workspace(ws, proxy, budget=gate)
            if journal.has(job.step):
                replayed = agent.replayed_step(job.step)
                if replayed is not None and replayed.get("attempt") == job.attempt:
                    span.set(status="replayed")
                    # This driver commits the replayed row (a journal of an older engine has no run in it).
                    return {"row": {**replayed["row"], "run": job.proxy.run_id, "t": datetime.fromisoformat(str(replayed["row"]["t"]))},
                            "calls": _with_texts(ws, job.step, replayed["calls"]), "replayed": True,
                            "memory": _memory_row(ws, job, agent_id, replayed.get("episodes_from"))}
                journal.rollback(job.step)
                await job.proxy.env.discard_pending(agent_id)
                rolled_back = True
                agent = await cls.from_workspace(ws, proxy, budget=gate)
            else:
                journal.begin(job.step)
            episodes_from = episodes_offset(DirWorkspace(ws))
            outcome = await agent.step(job.tick, job.t)
            row.update(status=outcome.status, tools_called=outcome.tools_called, summary=outcome.summary,
                       turns=outcome.turns, env_calls=outcome.env_calls, error=outcome.error)
        except BudgetExhaustedError:
            # Stop cleanly: nothing of this agent-step is committed; a resumed run steps it again.
            span.set(status="budget_exhausted")
            return None
        except (EnvUnavailableError, StaleRunError):
            raise  # not the agent's fault: the tick is re-run on a new env actor, or belongs to a newer driver
        except _ISOLATED as error:
            # Isolate the agent: its row says what went wrong; the batch goes on. The failed step is
            # undone (workspace and queued env updates), so the agent simply missed this tick.
            row.update(status="error", tools_called=[], turns=0, env_calls=0,
                       error=f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=3)}"[:2000])
            await _undo_failed_step(agent_id, job, agents_root)
        span.set(status=row["status"])
    row.update(_usage_columns(agent), duration_ms=(time.perf_counter() - started) * 1000)
    calls = call_rows(agent.meter.records if agent else [], run=job.proxy.run_id, step=job.step, scope="tick")
    record = {"row": row, "calls": [{k: v for k, v in c.items() if k not in TEXT_KEYS} for c in calls],
              "attempt": job.attempt, "rolled_back": rolled_back, "episodes_from": episodes_from}
    if agent is not None and row["status"] != "error":
        check_session(job.proxy.run_dir, job.session)  # type: ignore[arg-type]  # step_agent_batch asserted the run_dir
        try:
            assert agent.workspace is not None  # restored
            agent.workspace.write_json(_TEXTS, {"step": job.step, "texts": [[c["messages"], c["reply"]] for c in calls]})
            agent.commit_step(job.step, record)
            await agent.to_workspace()
            failpoint("mid_batch", step=job.step)
        except _ISOLATED as error:
            row.update(status="error", error=f"persisting the workspace failed: {error}")
            await _undo_failed_step(agent_id, job, agents_root)
    return {**record, "calls": calls, "memory": _memory_row(ws, job, agent_id, episodes_from)}


def _with_texts(ws: Path, step: int, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A committed step's call rows with the texts it kept for a retried batch."""
    kept = DirWorkspace(ws).read_json(_TEXTS)
    if kept.get("step") != step or len(kept.get("texts", ())) != len(calls):
        raise RunError(f"{ws / _TEXTS} does not hold the texts of step {step}'s {len(calls)} calls")
    return [{**call, "messages": messages, "reply": reply} for call, (messages, reply) in zip(calls, kept["texts"], strict=True)]


def _memory_row(ws: Path, job: BatchJob, agent_id: int, episodes_from: int | None) -> dict[str, Any] | None:
    """The agent's ``agent_memory`` row as its workspace holds it now (None: unreadable, so no row).

    ``episodes_from`` None: the step failed before it began, so it added no episodes."""
    try:
        offset = episodes_offset(DirWorkspace(ws)) if episodes_from is None else episodes_from
        return {"run": job.proxy.run_id, "step": job.step, "agent_id": agent_id, **memory_snapshot(DirWorkspace(ws), offset)}
    except (OSError, ValueError):
        return None


def _batch_abort(errors: BaseExceptionGroup) -> PolisError:
    """The one exception a batch ends with: a lost env actor or a stale session as such, anything
    else an agent-step raised (a bug, not an isolated agent error) as a RunError carrying its traceback."""
    found = errors.subgroup((EnvUnavailableError, StaleRunError))
    first: BaseException = (found or errors).exceptions[0]
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    if found is not None:
        return type(first)(str(first))  # type: ignore[return-value]  # found holds only PolisErrors
    if not isinstance(first, Exception):  # KeyboardInterrupt, SystemExit: not ours to translate
        raise first
    text = "".join(traceback.format_exception(first))
    return RunError(f"an agent-step crashed its batch: {type(first).__name__}: {first}\n{text[-3000:]}")


async def step_agent_batch(job: BatchJob) -> BatchResult:
    """Step every agent of ``job`` concurrently and write the batch's shards."""
    started = time.perf_counter()
    run_dir = job.proxy.run_dir
    assert run_dir is not None, "a batch needs a run directory"
    proxy = job.proxy.for_task()  # a trace recorder of this task's own: its spans are this batch's shard
    assert proxy.trace is not None and proxy.replay is not None
    recorder = proxy.trace.recorder
    gate = BudgetGate(job.allowance) if job.allowance is not None else None
    abort: PolisError | None = None
    try:
        # The env actor lost, or the run taken over by a newer driver: cancel the batch's other agents.
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(_step_one(a, job, proxy, RunLayout(run_dir).agents, recorder, gate)) for a in job.agent_ids]
    except BaseExceptionGroup as errors:
        abort = _batch_abort(errors)
    if abort is not None:
        raise abort  # a fresh exception, outside the handler: the group's reference cycles do not pickle
    results = [task.result() for task in tasks]
    done = [r for r in results if r is not None]
    rows = [r["row"] for r in done]
    calls = [call for r in done for call in r["calls"]]
    fresh_calls = [call for r in done if not r.get("replayed") for call in r["calls"]]
    part = shard_name(job.step, job.batch)
    check_session(run_dir, job.session)
    writer = proxy.replay.in_txn(job.txn)
    call_paths, transcripts = write_call_shards(writer, part, calls, job.text_allowance)
    written = [
        writer.write_shard(ACTIONS, part, rows),
        writer.write_shard(AGENT_MEMORY, part, [r["memory"] for r in done if r.get("memory") is not None]),
        *call_paths,
        proxy.trace.write(part, txn=job.txn),
    ]
    statuses: dict[str, int] = {}
    for row in rows:
        statuses[row["status"]] = statuses.get(row["status"], 0) + 1
    usage = Usage.of_calls(fresh_calls)
    return BatchResult(
        step=job.step,
        batch=job.batch,
        agents=len(rows),
        replayed=sum(1 for r in done if r.get("replayed")),
        statuses=statuses,
        llm_calls=sum(r["llm_calls"] for r in rows),
        input_tokens=sum(r["input_tokens"] for r in rows),
        output_tokens=sum(r["output_tokens"] for r in rows),
        env_calls=sum(r["env_calls"] for r in rows),
        usage=usage,
        budget_stopped=len(results) - len(done),
        duration_s=time.perf_counter() - started,
        worker_pid=os.getpid(),
        dispatcher_builds=dispatcher_stats()["builds"],
        staged=tuple(str(p) for p in written if p is not None),
        rolled_back=sum(1 for r in done if r.get("rolled_back")),
        transcripts=transcripts,
    )


async def run_tick_batches(client: Client, jobs: list[BatchJob], env: EnvHost, run_id: str, *, limit: int | None,
                           on_result: Callable[[BatchResult], None]) -> list[BatchResult]:
    """Run the tick's batches (see :func:`fan_out`; keys ``polis_<run_id>_agents-...``), sorted by batch.

    Raises:
        EnvUnavailableError: the env actor was lost meanwhile (the attempt ends; the tick is re-run).
    """

    def submit(job: BatchJob) -> Any:
        key = task_key(AGENTS, run_id, job.txn, job.attempt[:8], f"{job.batch:04d}")
        return client.submit(step_agent_batch, job, key=key, pure=False)

    def lost() -> EnvUnavailableError | None:
        return EnvUnavailableError("the env actor was lost during the tick") if env.lost else None

    watcher = asyncio.create_task(env.watch())
    try:
        results = await fan_out(client, jobs, submit, limit=limit, on_result=on_result, stop=lost)
    finally:
        watcher.cancel()
    return sorted(results, key=lambda r: r.batch)
