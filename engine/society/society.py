"""AgentSociety: the record-based orchestrator. It holds agent specs and ids, never agent objects.

Per tick: split ids into batches, submit one ``step_agent_batch`` future per batch (at most
``max_workers`` in flight), gather, run the env step, advance the clock, write SOCIETY_STEP.json.
With a budget, each batch gets a share of what remains; when the budget runs out the tick stops
at agent-step boundaries, the env state is saved as it is, and the run can resume later.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from distributed import Client, as_completed

from engine.agent.registry import resolve_agent
from engine.agent.service_proxy import ServiceProxy
from engine.agent.workspace import workspace_path
from engine.errors import BudgetExhaustedError
from engine.llm.budget import Allowance, Usage
from engine.society.batch import BatchJob, BatchResult, step_agent_batch
from engine.society.status import SocietyStep, write_society_step

__all__ = ["AgentSociety", "SocietyTotals", "plan_batches", "split_allowance"]


def plan_batches(agent_ids: list[int], batch_size: int) -> list[tuple[int, ...]]:
    """Split ids into ⌈N / batch_size⌉ consecutive batches."""
    return [tuple(agent_ids[i : i + batch_size]) for i in range(0, len(agent_ids), batch_size)]


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
    statuses: dict[str, int] = field(default_factory=dict)
    tick_seconds: list[float] = field(default_factory=list)
    worker_pids: set[int] = field(default_factory=set)
    dispatcher_builds: dict[int, int] = field(default_factory=dict)  #: worker pid -> backends built there (latest)
    dispatcher_builds_first: dict[int, int] = field(default_factory=dict)  #: ... as first seen in this run

    def add(self, result: BatchResult) -> None:
        self.agent_steps += result.agents
        self.llm_calls += result.llm_calls
        self.input_tokens += result.input_tokens
        self.output_tokens += result.output_tokens
        self.env_calls += result.env_calls
        self.worker_pids.add(result.worker_pid)
        self.dispatcher_builds[result.worker_pid] = result.dispatcher_builds
        self.dispatcher_builds_first.setdefault(result.worker_pid, result.dispatcher_builds)
        for status, n in result.statuses.items():
            self.statuses[status] = self.statuses.get(status, 0) + n


class AgentSociety:
    """Drive agents (as workspace records) and the environment (through its actor) tick by tick.

    Args:
        agent_specs: ``{"id", "type", "profile", "config"}`` per agent.
        env: the env actor handle (awaitable ``set_current_time``, ``step``, ``save``).
        service_proxy: what batch tasks receive (env proxy, LLM clients, run dir).
        start_t: simulated start time.
        run_dir: the run directory (``agents/`` holds the workspaces).
        client: an asynchronous distributed Client.
        batch_size: agents per batch future.
        max_workers: batch futures in flight at once (None: all).
        budget: the run's budget (None: unlimited).
        on_batch: called after each batch completes (progress reporting).
        status: where a resumed run stands (None: a fresh start at ``start_t``).
    """

    def __init__(
        self,
        agent_specs: list[dict[str, Any]],
        *,
        env: Any,
        service_proxy: ServiceProxy,
        start_t: datetime,
        run_dir: Path,
        client: Client,
        batch_size: int = 256,
        max_workers: int | None = None,
        budget: Allowance | None = None,
        on_batch: Callable[[BatchResult], None] | None = None,
        status: SocietyStep | None = None,
    ) -> None:
        self._specs = agent_specs
        self._env = env
        self._proxy = service_proxy
        self._run_dir = Path(run_dir)
        self._client = client
        self._batch_size = batch_size
        self._max_workers = max_workers
        self._budget = budget
        self._on_batch = on_batch
        self._status = status or SocietyStep(current_time=start_t)
        self.usage = Usage(**self._status.extra.get("usage", {}))
        self.totals = SocietyTotals()

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
    def agent_ids(self) -> list[int]:
        return [int(s["id"]) for s in self._specs]

    @property
    def agent_specs(self) -> list[dict[str, Any]]:
        return [dict(s) for s in self._specs]

    async def init(self) -> None:
        """Create every agent workspace (skipping ones that exist) and write SOCIETY_STEP.json."""
        root = self._run_dir / "agents"
        for spec in self._specs:
            ws = workspace_path(root, int(spec["id"]))
            if not (ws / "config.json").exists():
                resolve_agent(spec["type"]).create(ws, agent_id=int(spec["id"]), profile=spec["profile"], config=spec["config"])
        self.set_status("running")

    def _write_status(self) -> None:
        self._status.updated_at = time.time()
        self._status.extra["usage"] = {"calls": self.usage.calls, "tokens": self.usage.tokens, "cost_usd": self.usage.cost_usd}
        write_society_step(self._run_dir, self._status)

    async def to_workspace(self) -> None:
        self._write_status()

    def mark_step_completed(self, step_idx: int) -> None:
        """Record that top-level spec step ``step_idx`` (0-based) finished."""
        self._status.completed_steps = step_idx + 1
        self._write_status()

    def set_status(self, status: str, error: str | None = None) -> None:
        self._status.status, self._status.error = status, error
        self._write_status()

    def add_usage(self, usage: Usage) -> None:
        """Count provider usage made outside agent batches (the env router's calls)."""
        self.usage.add(usage)

    async def step(self, tick: int) -> list[BatchResult]:
        """One tick: batches of agents, then the env step, then the clock.

        Raises:
            BudgetExhaustedError: the budget ran out during the tick; the agents that finished it
                are committed, the env state is saved, and the tick resumes from there.
        """
        started = time.perf_counter()
        step = self._status.step_count + 1
        t_end = self._status.current_time + timedelta(seconds=tick)
        await self._env.set_current_time(self._status.current_time)
        batches = plan_batches(self.agent_ids, self._batch_size)
        allowances = split_allowance(self._budget, self.usage, len(batches)) if self._budget else [None] * len(batches)
        results = await self._run_batches(
            [BatchJob(ids, step, i, tick, t_end, self._proxy, allowances[i]) for i, ids in enumerate(batches)]
        )
        stopped = sum(r.budget_stopped for r in results)
        self._status.agent_steps_done += sum(r.agents - r.replayed for r in results)
        if stopped:
            await self._env.save()
            self.set_status("budget_exhausted", f"{stopped} agent-steps of step {step} wait for more budget")
            raise BudgetExhaustedError(f"budget exhausted during step {step}: {stopped} agent-steps not run")
        await self._env.step(step, tick, t_end)
        self._status.current_time = t_end
        self._status.step_count = step
        self.totals.tick_seconds.append(time.perf_counter() - started)
        self._write_status()
        return results

    async def _run_batches(self, jobs: list[BatchJob]) -> list[BatchResult]:
        limit = self._max_workers or len(jobs)
        pending = list(jobs)
        results: list[BatchResult] = []
        running = as_completed([], with_results=True)
        for _ in range(min(limit, len(pending))):
            running.add(self._submit(pending.pop(0)))
        async for _, result in running:
            results.append(result)
            self.totals.add(result)
            self.usage.add(result.usage)
            if self._on_batch is not None:
                self._on_batch(result)
            if pending:
                running.add(self._submit(pending.pop(0)))
        return sorted(results, key=lambda r: r.batch)

    def _submit(self, job: BatchJob) -> Any:
        key = f"step_agent_batch-{self._proxy.run_id}-{job.step:06d}-{job.batch:04d}"
        return self._client.submit(step_agent_batch, job, key=key, pure=False)

    async def run(self, num_steps: int, tick: int) -> None:
        for _ in range(num_steps):
            await self.step(tick)
