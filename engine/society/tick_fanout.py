"""A tick's batch futures: one ``step_agent_batch`` task per batch, fanned out while the env actor is watched."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from distributed import Client

from engine.errors import EnvUnavailableError
from engine.society.batch import BatchJob, BatchResult, step_agent_batch
from engine.society.env_host import EnvHost
from engine.society.fanout import fan_out
from engine.society.run.dashboard import AGENTS, task_key

__all__ = ["run_tick_batches"]


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
