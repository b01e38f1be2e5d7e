"""Make a fork's run directory: the parent's state as tick ``K`` committed it, ready to be resumed.

Nothing of the parent changes. Files the parent never rewrites are hard-linked: the replay, trace
and artifact files its transactions up to tick ``K`` published (so the fork's datasets begin with
the parent's rows, their ``run`` column naming the parent's drivers), the response cache (the
shared past costs no provider call) and ``inputs/``. Agent workspaces are copied as tick ``K`` left
them (:mod:`engine.society.fork.workspaces`); ``env/`` is copied with only tick ``K``'s snapshot.
``SOCIETY.json`` carries the fork's spec and its lineage under ``fork``; ``SOCIETY_STEP.json`` is
the parent's status at tick ``K`` with status ``pending``, so ``run_experiment(..., resume=True)``
takes it from there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.agent.workspace import workspace_path
from engine.errors import ForkError, RunError
from engine.run_status import RunStatus
from engine.society.datasets import ACTIONS
from engine.society.fork.plan import ForkSpec, fork_spec
from engine.society.fork.workspaces import copy_workspace_as_of, workspace_kept
from engine.society.history import TICK, History, TxnRecord
from engine.society.lease import lease_is_live, read_lease
from engine.society.status import SocietyStep, read_society_step, write_society_step
from engine.society.workspaces.manifest import PACKED, manifest_key, read_manifest, run_store
from engine.spec import ExperimentSpec, parse_spec
from engine.storage.atomic import atomic_write_json, read_json
from engine.storage.catalog import RUN_COLUMN
from engine.storage.run_layout import TRACE_DIR, RunLayout

__all__ = ["ForkPoint", "ForkReport", "copy_env_as_of", "find_fork_point", "kept_tick", "link_tree", "materialize_fork", "plan_fork"]


@dataclass(frozen=True)
class ForkPoint:
    """A parent run and the committed tick a fork (or an as-of read) starts from."""

    parent: Path
    at_step: int
    record: TxnRecord  #: the transaction that committed the tick (txn 0: the run before its first)
    stored: dict[str, Any]  #: the parent's ``SOCIETY.json``
    ticks_done: int  #: the parent's committed ticks

    @property
    def spec(self) -> ExperimentSpec:
        return parse_spec(self.stored["spec"])

    @property
    def agent_ids(self) -> list[int]:
        return _agent_ids(self.stored)


@dataclass(frozen=True)
class ForkReport:
    """What making the fork's directory took."""

    run_dir: Path
    agents: int
    workspace_bytes: int  #: bytes copied into agent workspaces
    linked_files: int  #: replay, trace, artifact, cache and input files hard-linked from the parent
    seconds: float


def find_fork_point(parent: Path, at_step: int) -> ForkPoint:
    """The parent's state at tick ``at_step``, checked to be there.

    Raises:
        RunError: ``parent`` holds no run.
        ForkError: a live driver holds the parent, or it does not keep that tick (its history, env
            snapshot or an agent's journal is gone: ``snapshots.keep``).
        SpecError: ``at_step`` outside the parent's committed ticks (path ``at_step``).
    """
    parent = Path(parent)
    stored = read_json(RunLayout(parent).society_file, default=None)
    status = read_society_step(parent)
    if stored is None or status is None:
        raise RunError(f"{parent} holds no run (SOCIETY.json / SOCIETY_STEP.json missing)")
    if lease_is_live(read_lease(parent)):
        raise ForkError(f"{parent} is running: fork it once its driver stops (its workspaces are changing)")
    spec = parse_spec(stored["spec"])
    fork_spec(spec, at_step, status.step_count)  # at_step in range, spec forkable
    record = kept_tick(parent, at_step, start_time=spec.start_time, through_txn=status.txn, ticks_done=status.step_count,
                       agent_ids=_agent_ids(stored))
    return ForkPoint(parent, at_step, record, stored, status.step_count)


def _agent_ids(stored: dict[str, Any]) -> list[int]:
    """The agents a run's ``SOCIETY.json`` lists."""
    return [int(s["id"]) for s in stored["agent_specs"]]


def kept_tick(run_dir: Path, step: int, *, start_time: datetime | None, through_txn: int, ticks_done: int,
              agent_ids: Iterable[int]) -> TxnRecord:
    """The record of tick ``step`` (tick 0: the run before its first transaction, at ``start_time``, which
    only tick 0 needs), checked to be kept: its env snapshot and, for each of ``agent_ids``, the workspace
    as it left it.

    Raises:
        ForkError: the run keeps no history record of the tick, its env snapshot or an agent's journal
            (``snapshots.keep``).
    """
    store = run_store(run_dir)
    if step == 0:
        assert start_time is not None, "tick 0 is the run's start: give its start time"
        created = manifest_key(0) if store.exists(manifest_key(0)) else None  # packed runs: the agents as created
        record = TxnRecord(0, TICK, SocietyStep(current_time=start_time, workspaces=created), ())
    else:
        record = History(run_dir).tick(step, through_txn)
    snapshot = record.status.env_snapshot
    if snapshot is not None and not (RunLayout(run_dir).env_snapshots / snapshot).is_dir():
        raise ForkError(f"{run_dir}: the env snapshot of tick {step} ({snapshot}) is not kept; raise snapshots.keep")
    if record.status.workspaces is not None:
        manifest = read_manifest(store, record.status.workspaces)
        gone = [pack for pack in manifest.reads if not store.exists(pack)]
        listed = manifest.where()
        missing = [a for a in dict.fromkeys(agent_ids) if a not in listed]
        if gone or missing:
            raise ForkError(f"{run_dir}: tick {step} is not kept (packs {gone[:3]} are gone, agents {missing[:10]} unlisted); "
                            "raise snapshots.keep")
        return record
    root = RunLayout(run_dir).agents
    missing = [a for a in dict.fromkeys(agent_ids) if not workspace_kept(workspace_path(root, a), step, ticks_done)]
    if missing:
        raise ForkError(f"{run_dir}: tick {step} is not kept for agent(s) {missing[:10]} (no journal of tick {step + 1}); "
                        "raise snapshots.keep")
    return record


def plan_fork(parent: Path, at_step: int, patch: dict[str, Any] | None = None) -> tuple[ForkPoint, ForkSpec]:
    """The fork point and the fork's checked spec (see :func:`~engine.society.fork.plan.fork_spec`)."""
    point = find_fork_point(parent, at_step)
    return point, fork_spec(point.spec, at_step, point.ticks_done, patch)


def materialize_fork(point: ForkPoint, fork: ForkSpec, run_dir: Path) -> ForkReport:
    """Write ``run_dir`` (absent or empty) as the fork's run directory.

    Raises:
        ForkError: ``run_dir`` holds something, or is the parent.
        StorageError: the parent's replay cannot be read (for its run ids); nothing is written then.
    """
    started = time.perf_counter()
    run_dir = Path(run_dir)
    if run_dir.resolve() == point.parent.resolve():
        raise ForkError("a fork needs its own run directory, not the parent's")
    if run_dir.exists() and any(run_dir.iterdir()):
        raise ForkError(f"{run_dir} is not empty: a fork starts in a new run directory")
    parent_runs = _parent_runs(point)
    run_dir.mkdir(parents=True, exist_ok=True)
    source, target = RunLayout(point.parent), RunLayout(run_dir)
    linked = _link_published(point, run_dir)
    linked += link_tree(source.llm_cache, target.llm_cache) + link_tree(source.inputs, target.inputs)
    for name in (source.replay / "_schema.json", source.manifest_file):  # the manifest: a changed served model warns
        with contextlib.suppress(FileNotFoundError):
            shutil.copy2(name, target.root / name.relative_to(source.root))
    copy_env_as_of(source, target, point.record.status.env_snapshot)
    copied = 0
    workspaces = point.record.status.workspaces
    if (workspaces is not None) != (fork.spec.storage.workspaces == PACKED):
        raise ForkError(f"the parent keeps its workspaces {'in packs' if workspaces else 'in folders'}; a fork keeps them "
                        "the same way (storage.workspaces cannot change)")
    if workspaces is not None:  # packs never change: link them, and the manifest that lists them
        parent_store = run_store(point.parent)
        for key in (workspaces, *read_manifest(parent_store, workspaces).reads):
            _link(point.parent / key, run_dir / key)
            copied += parent_store.size(key)
    for agent_id in point.agent_ids if workspaces is None else ():
        copied += copy_workspace_as_of(workspace_path(source.agents, agent_id), workspace_path(target.agents, agent_id),
                                       point.at_step, point.ticks_done)
    lineage = {"parent": str(point.parent.resolve()), "at_step": point.at_step, "txn": point.record.txn,
               "parent_spec_hash": point.stored.get("spec_hash"), "parent_runs": parent_runs}
    atomic_write_json(target.society_file, {**point.stored, "spec": fork.spec.model_dump(mode="json"),
                                            "spec_hash": fork.spec.spec_hash(), "fork": lineage}, indent=2)
    write_society_step(run_dir, replace(point.record.status, status=RunStatus.PENDING, error=None,
                                        completed_steps=fork.completed_steps, updated_at=time.time()))
    return ForkReport(run_dir, len(point.agent_ids), copied, linked, time.perf_counter() - started)


def _link_published(point: ForkPoint, run_dir: Path) -> int:
    """Hard-link what the parent's transactions up to the fork point published, and their tick spans."""
    parent, child = History(point.parent), History(run_dir)
    records = parent.records(point.record.txn)
    files = [f for record in records for f in record.files]
    files += [os.path.join(TRACE_DIR, f"step_{k:06d}-part_tick.jsonl") for k in range(1, point.at_step + 1)]
    linked = 0
    for relative in files:
        source = point.parent / relative
        if source.exists():
            _link(source, run_dir / relative)
            linked += 1
    for record in records:
        _link(parent.path(record.txn), child.path(record.txn))
    return linked


def _link(source: Path, target: Path) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    try:
        os.link(source, target)
    except OSError:  # another file system (or one without hard links): copy
        shutil.copy2(source, target)


def link_tree(source: Path, target: Path) -> int:
    """Hard-link every file under ``source`` (but temp files) to the same place under ``target``; returns how many."""
    linked = 0
    for directory, _, names in os.walk(source):
        for name in names:
            if not name.startswith("."):  # temp files of a write in progress
                path = Path(directory, name)
                _link(path, target / path.relative_to(source))
                linked += 1
    return linked


def copy_env_as_of(source: RunLayout, target: RunLayout, snapshot: str | None) -> None:
    """Copy ``source``'s ``env/`` into ``target``'s with only the env snapshot ``snapshot`` (None: none)."""
    if source.env.is_dir():
        shutil.copytree(source.env, target.env, symlinks=True,
                        ignore=lambda directory, _: ["_snapshots"] if Path(directory) == source.env else [])
    if snapshot is not None:
        shutil.copytree(source.env_snapshots / snapshot, target.env_snapshots / snapshot, symlinks=True)


def _parent_runs(point: ForkPoint) -> list[str]:
    """The parent's driver run ids in the rows the fork starts with (each driver names its rows' ``run``).

    Empty when the parent has no ``actions`` yet, or wrote them with an engine that had no ``run`` there.

    Raises:
        StorageError: the parent's replay cannot be read (a malformed catalog, an unreadable shard).
    """
    from engine.storage.reader import ReplayReader

    with ReplayReader(point.parent) as reader:
        if ACTIONS.name not in reader.datasets() or RUN_COLUMN.name not in {c.name for c in reader.schema(ACTIONS.name).columns}:
            return []
        rows = reader.query(f"SELECT DISTINCT {RUN_COLUMN.name} AS run FROM {ACTIONS.name} "
                            f"WHERE step <= ? AND {RUN_COLUMN.name} IS NOT NULL ORDER BY 1", [point.at_step]).to_pylist()
    return [row["run"] for row in rows]
