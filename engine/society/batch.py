"""step_agent_batch: the Dask task that steps one batch of agents for one tick (``run_tick_batches`` fans them out).

It is an ``async def`` so Dask runs it on the worker's event loop, where awaiting the env actor
works. Each agent is rebuilt from its workspace, stepped, and written back; a failing agent is
recorded with its error and the rest of the batch continues.

Exactly once per (agent, step): see :mod:`engine.society.workspaces.packed` (packed runs: a batch is
all or nothing) and :mod:`engine.society.workspaces.journaled` (one folder per agent: a journal per
agent-step). Shards are staged in the tick's transaction and appear only when the society commits it.

Beside ``actions`` and ``llm_calls`` a batch writes ``transcripts`` (the calls' text, up to the batch's
share of the run's cap) and ``agent_memory`` (each agent's memory at the end of its step).
"""

from __future__ import annotations

import asyncio
import os
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.agent.packed import PackedWorkspaces
from engine.errors import EnvUnavailableError, PolisError, RunError, StaleRunError
from engine.llm.budget import BudgetGate, Usage
from engine.llm.dispatcher import dispatcher_stats, flush_response_caches, refresh_response_caches
from engine.society.batch_result import BatchResult
from engine.society.datasets import ACTIONS, AGENT_MEMORY
from engine.society.lease import check_session
from engine.society.run.dashboard import AGENTS, task_key
from engine.society.run.live_calls import publishing
from engine.society.tiered.batch import step_tier_batch
from engine.society.tiered.telemetry import digest_on_span, sizes_by_tier
from engine.society.transcripts import write_call_shards
from engine.society.workspaces.common import BatchJob
from engine.society.workspaces.journaled import step_journaled_agent
from engine.society.workspaces.packed import begin_packed_batch, step_packed_agent, write_batch_pack
from engine.storage.run_layout import RunLayout, run_store
from engine.storage.shards import shard_name

if TYPE_CHECKING:
    from engine.society.shells.base import EnvHost, Shell

__all__ = ["BatchResult", "run_tick_batches", "step_agent_batch"]  # BatchResult: from engine.society.batch_result


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


def _stepped(result: dict[str, Any] | None) -> int:
    """1 for an agent stepped now (not stopped by the budget, nor re-emitted from an earlier attempt), as the result counts it."""
    return int(result is not None and not result.get("replayed"))


async def step_agent_batch(job: BatchJob) -> BatchResult:
    """Step every agent of ``job`` concurrently and write the batch's shards (a tier batch: :func:`step_tier_batch`)."""
    if job.tiers is not None:
        return await step_tier_batch(job)
    started = time.perf_counter()
    run_dir = job.proxy.run_dir
    assert run_dir is not None, "a batch needs a run directory"
    proxy = job.proxy.for_task()  # a trace recorder of this task's own: its spans are this batch's shard
    assert proxy.trace is not None and proxy.replay is not None
    recorder = proxy.trace.recorder
    gate = BudgetGate(job.allowance) if job.allowance is not None else None
    refresh_response_caches()
    packed = PackedWorkspaces(run_store(run_dir), checkpoint_every=job.checkpoint_every) if job.packs is not None else None
    abort: PolisError | None = None
    retried = False
    try:
        retried = packed is not None and await begin_packed_batch(job, packed)
        with publishing(job.live_scope, run=job.proxy.run_id, batch=job.batch) as live:
            # The env actor lost, or the run taken over by a newer driver: cancel the batch's other agents.
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(live.counted(
                    step_journaled_agent(a, job, proxy, RunLayout(Path(run_dir)).agents, recorder, gate) if packed is None
                    else step_packed_agent(a, job, proxy, packed, recorder, gate), _stepped)) for a in job.agent_ids]
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
    await asyncio.to_thread(flush_response_caches)  # the answers this batch used are on disk before its tick commits
    check_session(run_dir, job.session)
    pack, reads = await asyncio.to_thread(write_batch_pack, job, packed, results) if packed is not None else (None, ())
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
    sizes = sizes_by_tier(calls)
    digest_on_span(sizes)
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
        staged=tuple(k for k in written if k is not None),
        rolled_back=len(job.agent_ids) if retried else sum(1 for r in done if r.get("rolled_back")),
        transcripts=transcripts,
        pack=pack,
        pack_reads=reads,
        calls_by_tier=sizes,
    )


async def run_tick_batches(shell: Shell, jobs: list[BatchJob], env: EnvHost, run_id: str, *, limit: int | None,
                           on_result: Callable[[BatchResult], None]) -> list[BatchResult]:
    """Run the tick's batches on ``shell`` (keys ``polis_<run_id>_agents-...``), sorted by batch.

    Raises:
        EnvUnavailableError: the env router was lost meanwhile (the attempt ends; the tick is re-run).
    """

    def key(job: BatchJob) -> str:
        return task_key(AGENTS, run_id, job.txn, job.attempt[:8], f"{job.batch:04d}")

    results = await shell.fan_out(step_agent_batch, jobs, key, limit=limit, on_result=on_result, env=env)
    return sorted(results, key=lambda r: r.batch)
