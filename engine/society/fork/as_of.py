"""Interviews as of a kept tick: the agents' workspaces as tick ``K`` left them.

A questionnaire or ask step with ``as_of_step: K`` puts its questions to the agents as tick ``K`` left
them. On a packed run they are read from the packs tick ``K``'s workspace manifest lists, with no copy;
on a ``dir`` run they are copies made here (:func:`~engine.society.fork.workspaces.copy_workspace_as_of`)
under ``<run_dir>/scratch/as_of-<txn>-<token>/agents/`` (inside the run directory, so every worker sees
them). Scratch goes when the step ends, also when it fails. Nothing stored is written: the step's
own rows and artifact are staged in its transaction like any questionnaire's or ask's. An ask step
also reads the environment as of ``K``: a second env actor (:func:`start_as_of_env`) restores tick
``K``'s snapshot from a copy of ``env/`` under the same scratch prefix of the run's store and serves the
helper; its router calls are the step's own rows.

Refusals: ``K`` after the ticks committed before the step is a :class:`~engine.errors.SpecError`
(path ``steps.<i>.as_of_step``); a tick the run no longer keeps (``snapshots.keep``) is a
:class:`~engine.errors.ForkError`.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from engine.agent.packed import export_workspace
from engine.agent.workspace import AgentWorkspace, DirWorkspace, workspace_path
from engine.agent.workspace_in_memory import MemoryWorkspace
from engine.errors import ForkError, RunError, SpecError
from engine.society.fork.materialize import copy_env_as_of, kept_tick
from engine.society.fork.workspaces import copy_workspace_as_of
from engine.society.status import SocietyStep, read_society, read_society_step
from engine.society.workspaces.manifest import AgentSource, read_manifest
from engine.spec import AskStep, ExperimentSpec, QuestionnaireStep, RunStep, StepSpec, parse_spec
from engine.storage.run_layout import INPUTS_DIR, RunLayout, RunLocation, as_location, as_of_scratch, run_store
from engine.storage.store import copy_keys

if TYPE_CHECKING:
    from engine.society.shells.base import EnvHost

__all__ = ["AsOf", "AsOfAgents", "agent_as_of", "check_as_of_kept", "check_as_of_steps", "export_agent", "find_as_of", "start_as_of_env"]


def check_as_of_steps(steps: Sequence[StepSpec], *, ticks_before: int = 0, first_index: int = 0) -> None:
    """Refuse an ``as_of_step`` after the ticks committed before its step (sans-IO).

    Args:
        steps: top-level steps, in order.
        ticks_before: ticks committed before the first of them.
        first_index: the spec index of the first of them (for the error's path).

    Raises:
        SpecError: a step reading a tick in its future (path ``steps.<i>.as_of_step``).
    """
    ticks = ticks_before
    for offset, step in enumerate(steps):
        if isinstance(step, RunStep):
            ticks += step.num_steps
            continue
        as_of = getattr(step, "as_of_step", None)
        if as_of is not None and as_of > ticks:
            raise SpecError(f"tick {as_of} is not committed before this step (it follows {ticks} tick(s))",
                            path=f"steps.{first_index + offset}.as_of_step")


@dataclass(frozen=True)
class AsOf:
    """A kept tick an as-of step reads."""

    step: int  #: the tick ``K``
    t: datetime  #: the simulated time tick ``K`` ended at (the start time for ``K = 0``)
    txn: int  #: the transaction that committed it (0 for ``K = 0``)
    ticks_done: int  #: the run's committed ticks when the step reads it
    env_snapshot: str | None = None  #: the env snapshot tick ``K`` committed (None for ``K = 0``)
    workspaces: str | None = None  #: packed runs: the workspace manifest of tick ``K``


def find_as_of(run_dir: RunLocation, step: int, *, ticks_done: int, through_txn: int, agent_ids: Iterable[int],
               step_index: int | None = None) -> AsOf:
    """Tick ``step`` of the run in ``run_dir``, checked to be kept for ``agent_ids``.

    Args:
        run_dir: the run directory.
        step: the tick ``K``.
        ticks_done: the run's committed ticks.
        through_txn: the run's committed transactions.
        agent_ids: the agents the step reads.
        step_index: the spec step asking (names the error's path).

    Raises:
        SpecError: ``step`` after ``ticks_done`` (path ``steps.<i>.as_of_step``).
        ForkError: the run keeps no history record of that tick, or no journal of it for some agent
            (``snapshots.keep``).
    """
    if step > ticks_done:
        raise SpecError(f"tick {step} is not committed (the run has {ticks_done} tick(s))",
                        path=f"steps.{step_index}.as_of_step" if step_index is not None else "as_of_step")
    start_time = None
    if step == 0:  # the run before its first transaction: its start time is the spec's
        stored = read_society(run_dir)
        if stored is None:
            raise RunError(f"{run_dir} holds no run (no SOCIETY.json)")
        start_time = parse_spec(stored["spec"]).start_time
    record = kept_tick(run_dir, step, start_time=start_time, through_txn=through_txn,
                       ticks_done=ticks_done, agent_ids=agent_ids)
    t, txn, snapshot = record.status.current_time, record.txn, record.status.env_snapshot
    return AsOf(step, t, txn, ticks_done, snapshot, record.status.workspaces)


def check_as_of_kept(spec: ExperimentSpec, run_dir: RunLocation, status: SocietyStep) -> None:
    """Check, before a stored run is resumed, that every pending ``as_of_step`` on ticks it has
    committed reads a tick it keeps (so a refused extension leaves the run as it was).

    Args:
        spec: the (extended) spec to resume with.
        run_dir: the run directory.
        status: where the run stands (``SOCIETY_STEP.json``).

    Raises:
        SpecError: a tick after the run's ticks.
        ForkError: a tick not kept (``snapshots.keep``).
    """
    ticks = 0
    every = [agent.id for agent in spec.all_agents()]
    for index, step in enumerate(spec.steps):
        if isinstance(step, RunStep):
            ticks += step.num_steps
        elif (isinstance(step, QuestionnaireStep | AskStep) and step.as_of_step is not None
              and index >= status.completed_steps and ticks <= status.step_count):
            ids = step.target_agent_ids if isinstance(step, QuestionnaireStep) and step.target_agent_ids else every
            find_as_of(run_dir, step.as_of_step, ticks_done=status.step_count, through_txn=status.txn, agent_ids=ids,
                       step_index=index)


class AsOfAgents:
    """The agents (and, for an ask, the env) as tick ``at.step`` left them, for one step; scratch removed on exit.

    Use as ``with AsOfAgents(run_dir, at, txn) as agents: agents.source(ids)``.
    """

    def __init__(self, run_dir: RunLocation, at: AsOf, txn: int) -> None:
        self.at = at
        self._run_dir = as_location(run_dir)
        self._txn, self._token = txn, uuid.uuid4().hex[:12]
        self._made: set[int] = set()

    @property
    def scratch(self) -> Path | str:
        """This step's scratch: the run directory of the as-of env actor, the parent of the agents' copies."""
        if isinstance(self._run_dir, str):
            return f"{self._run_dir.rstrip('/')}/{as_of_scratch(self._txn, self._token)}"
        return RunLayout(self._run_dir).as_of_agents(self._txn, self._token).parent

    def source(self, agent_ids: Iterable[int]) -> AgentSource:
        """Where the step reads ``agent_ids``: tick ``K``'s packs, or (``dir`` runs) copies made now.

        Raises:
            ForkError: an agent's tick is not kept.
        """
        if self.at.workspaces is not None:
            return AgentSource(run_dir=self._run_dir, packs=read_manifest(run_store(self._run_dir), self.at.workspaces).where())
        return AgentSource(folders=self._copy_folders(agent_ids))

    def _copy_folders(self, agent_ids: Iterable[int]) -> Path:
        layout = RunLayout(Path(self._run_dir))  # dir runs are on local disk
        root, source = layout.as_of_agents(self._txn, self._token), layout.agents
        for agent_id in [a for a in dict.fromkeys(agent_ids) if a not in self._made]:
            copy_workspace_as_of(workspace_path(source, agent_id), workspace_path(root, agent_id), self.at.step, self.at.ticks_done)
            self._made.add(agent_id)
        return root

    def materialize_env(self) -> Path | str:
        """Copy the run's ``env/`` as tick ``at.step`` left it (its snapshot only) and its ``inputs/`` into this
        step's scratch; returns the scratch, the run directory of an as-of env actor."""
        scratch = self.scratch
        source, target = run_store(self._run_dir), run_store(scratch)
        copy_env_as_of(source, target, self.at.env_snapshot)
        copy_keys(source, target, source.list_prefix(INPUTS_DIR + "/"))
        return scratch

    def close(self) -> None:
        """Remove this step's scratch (and ``scratch/`` once it is empty)."""
        scratch = self.scratch
        if isinstance(scratch, str):
            run_store(self._run_dir).delete_prefix(as_of_scratch(self._txn, self._token) + "/")
            return
        shutil.rmtree(scratch, ignore_errors=True)
        try:
            scratch.parent.rmdir()
        except OSError:  # another step's scratch is there, or it is gone already
            pass

    def __enter__(self) -> AsOfAgents:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None) -> None:
        self.close()


async def start_as_of_env(host: EnvHost, as_of: AsOfAgents) -> EnvHost:
    """A second env actor, the run's env as tick ``as_of.at.step`` left it, working in a scratch copy
    (:meth:`AsOfAgents.materialize_env`) so that nothing of the run's own ``env/`` changes. The
    caller releases it."""
    scratch = await asyncio.to_thread(as_of.materialize_env)
    temporary = host.scratch(scratch, f"as-of-{as_of.at.step}")
    await temporary.start(as_of.at.env_snapshot)
    return temporary


def agent_as_of(run_dir: RunLocation, agent_id: int, at_step: int | None = None) -> AgentWorkspace:
    """One agent's workspace, as the run stands or as kept tick ``at_step`` left it (packed or folder run alike), to read.

    Raises:
        RunError: ``run_dir`` holds no run.
        SpecError: ``at_step`` after the run's committed ticks.
        ForkError: the tick is not kept (``snapshots.keep``), or the run has no such agent.
    """
    status = read_society_step(run_dir)
    if status is None:
        raise RunError(f"{run_dir} holds no run (no SOCIETY_STEP.json)")
    if at_step is None:
        source = AgentSource.of_run(run_dir)
    else:
        at = find_as_of(run_dir, at_step, ticks_done=status.step_count, through_txn=status.txn, agent_ids=[agent_id])
        if at.workspaces is None:  # a folder run keeps tick K in step journals: copy, then hold in memory
            with tempfile.TemporaryDirectory() as scratch:
                copy = workspace_path(Path(scratch), agent_id)
                copy_workspace_as_of(workspace_path(RunLayout(Path(run_dir)).agents, agent_id), copy, at_step, status.step_count)
                folder = DirWorkspace(copy)
                return MemoryWorkspace(folder.name, {path: folder.read_bytes(path) for path in folder.files()}, list(folder.dirs()))
        source = AgentSource(run_dir=run_dir, packs=read_manifest(run_store(run_dir), at.workspaces).where())
    workspace = source.opener()(agent_id)
    if workspace is None:
        raise ForkError(f"{run_dir} has no agent {agent_id}" + ("" if at_step is None else f" at tick {at_step}"))
    return workspace


def export_agent(run_dir: RunLocation, agent_id: int, dest: Path, *, at_step: int | None = None) -> int:
    """Write one agent's workspace (see :func:`agent_as_of`) into ``dest`` as a folder in AS2's layout; returns the bytes.

    Raises:
        RunError: ``run_dir`` holds no run, or ``dest`` is not empty.
        SpecError: ``at_step`` after the run's committed ticks.
        ForkError: the tick is not kept (``snapshots.keep``), or the run has no such agent.
    """
    if dest.exists() and any(dest.iterdir()):
        raise RunError(f"{dest} is not empty: a workspace is exported into a new folder")
    return export_workspace(agent_as_of(run_dir, agent_id, at_step), dest)
