"""One agent-step on a workspace folder (the spec's ``storage.workspaces: dir``), made a transaction by its journal.

Exactly once per (agent, step): before an agent steps, a :class:`StepJournal` records its workspace.
An agent that already committed this step *in this attempt of the tick* (Dask retried the task after
its worker died; the env actor still holds the agent's queued updates) re-emits its recorded rows.
Any other journalled agent (died mid-step, or the tick is being re-run on restored env state) is
rolled back to the journal and its queued env updates are dropped before it steps again.

The replay record of a step keeps its call rows without their text; the text waits in the workspace's
``.runtime/logs/step_texts.json`` (the last step's only, so it does not pile up), to be re-emitted
with the record by a retried batch.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.agent.base import AgentBase
from engine.agent.journal import StepJournal
from engine.agent.memory.snapshot import episodes_offset
from engine.agent.registry import resolve_agent
from engine.agent.service_proxy import ServiceProxy
from engine.agent.workspace import DirWorkspace, workspace_path
from engine.errors import BudgetExhaustedError, EnvUnavailableError, PolisError, RunError, StaleRunError
from engine.failpoints import failpoint
from engine.llm.budget import BudgetGate
from engine.llm.meter import serving_agent
from engine.society.history import forget_journals, journals_to_discard
from engine.society.lease import check_session
from engine.society.transcripts import TEXT_KEYS, call_rows
from engine.society.workspaces.common import ISOLATED, BatchJob, memory_row, usage_columns
from engine.storage.run_layout import RunLayout
from engine.trace import TraceRecorder

__all__ = ["FolderAgents", "step_journaled_agent"]

#: Where an agent-step's call texts wait for a retried batch (see the module docstring).
_TEXTS = ".runtime/logs/step_texts.json"


async def _undo_failed_step(agent_id: int, job: BatchJob, agents_root: Path) -> None:
    journal = StepJournal(workspace_path(agents_root, agent_id))
    if journal.has(job.step):
        with contextlib.suppress(PolisError, OSError):
            journal.rollback(job.step)
            await job.proxy.env.discard_pending(agent_id)


async def step_journaled_agent(
    agent_id: int, job: BatchJob, proxy: ServiceProxy, agents_root: Path, recorder: TraceRecorder, gate: BudgetGate | None
) -> dict[str, Any] | None:
    """Step one agent; returns ``{"row", "calls"}``, or None when the budget stopped it.

    ``proxy`` is the task's (:meth:`ServiceProxy.for_task`); ``recorder`` is its trace recorder.
    """
    started = time.perf_counter()
    serving_agent.set(agent_id)  # this coroutine runs as its own task: the setting stays with this agent
    row: dict[str, Any] = {"run": job.proxy.run_id, "agent_id": agent_id, "step": job.step, "t": job.t, "agent_type": None,
                           "tier": "llm"}
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
                            "memory": memory_row(DirWorkspace(ws), job.proxy.run_id, job.step, agent_id, replayed.get("episodes_from"))}
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
        except ISOLATED as error:
            # Isolate the agent: its row says what went wrong; the batch goes on. The failed step is
            # undone (workspace and queued env updates), so the agent simply missed this tick.
            row.update(status="error", tools_called=[], turns=0, env_calls=0,
                       error=f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=3)}"[:2000])
            await _undo_failed_step(agent_id, job, agents_root)
        span.set(status=row["status"])
    row.update(usage_columns(agent), duration_ms=(time.perf_counter() - started) * 1000)
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
        except ISOLATED as error:
            row.update(status="error", error=f"persisting the workspace failed: {error}")
            await _undo_failed_step(agent_id, job, agents_root)
    return {**record, "calls": calls, "memory": memory_row(DirWorkspace(ws), job.proxy.run_id, job.step, agent_id, episodes_from)}


def _with_texts(ws: Path, step: int, calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A committed step's call rows with the texts it kept for a retried batch."""
    kept = DirWorkspace(ws).read_json(_TEXTS)
    if kept.get("step") != step or len(kept.get("texts", ())) != len(calls):
        raise RunError(f"{ws / _TEXTS} does not hold the texts of step {step}'s {len(calls)} calls")
    return [{**call, "messages": messages, "reply": reply} for call, (messages, reply) in zip(calls, kept["texts"], strict=True)]


class FolderAgents:
    """A ``dir`` run's agents as its driver sees them: a folder each (the same calls as
    :class:`~engine.society.workspaces.manifest.PackedAgents`, which keeps them in packs).

    Args:
        run_dir: the run directory (``agents/`` holds the folders).
        snapshots_keep: the spec's ``snapshots.keep`` (which step journals stay).
    """

    def __init__(self, run_dir: Path, snapshots_keep: int | None) -> None:
        self.root, self.run_dir, self.snapshots_keep = RunLayout(run_dir).agents, run_dir, snapshots_keep

    def open(self, committed: str | None, specs: list[dict[str, Any]], *, txn: int, batch_size: int,
             on_created: Callable[[int], None] | None = None) -> None:
        """Create the folders of agents that have none (a folder run names no manifest: returns None); ``on_created``
        hears how many agents have theirs so far, at the start, every ``batch_size`` agents and at the end."""
        for done, spec in enumerate(specs):
            if on_created is not None and done % batch_size == 0:
                on_created(done)
            ws = workspace_path(self.root, int(spec["id"]))
            if not (ws / "config.json").exists():
                resolve_agent(spec["type"]).create(ws, agent_id=int(spec["id"]), profile=spec["profile"], config=spec["config"])
        if on_created is not None:
            on_created(len(specs))

    def packs_of(self, agent_ids: Iterable[int]) -> None:
        """No packs: batches step the folders."""

    def source(self, agent_ids: Iterable[int]) -> None:
        """No source: readers read the folders under ``agents/``."""

    def stage(self, txn: int, batches: Iterable[tuple[str | None, tuple[int, ...], tuple[str, ...]]]) -> None:
        """Nothing to stage: the step journals hold the tick until its commit."""

    def forget(self, agent_ids: Iterable[int], step_count: int) -> None:
        """At a run's end: drop the journals of ticks ``snapshots.keep`` does not keep."""
        forget_journals(self.run_dir, agent_ids, step_count, self.snapshots_keep)
