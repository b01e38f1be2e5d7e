"""Make a fork's run directory: the parent's state as tick ``K`` committed it, ready to be resumed.

Nothing of the parent changes. Keys the parent never rewrites are copied with
:func:`~engine.storage.store.copy_keys` (hard links between two local runs): the replay, trace and
artifact keys its transactions up to tick ``K`` published (so the fork's datasets begin with the
parent's rows, their ``run`` column naming the parent's drivers), the response cache (the shared
past costs no provider call), ``inputs/`` and, on packed runs, the packs tick ``K`` reads. Folder
workspaces are copied as tick ``K`` left them (:mod:`engine.society.fork.workspaces`); ``env/`` is
copied with only tick ``K``'s snapshot. Parent and fork may be on different stores.
``SOCIETY.json`` carries the fork's spec and its lineage under ``fork``; ``SOCIETY_STEP.json`` is
the parent's status at tick ``K`` with status ``pending``, so ``run_experiment(..., resume=True)``
takes it from there.
"""

from __future__ import annotations

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
from engine.society.status import SocietyStep, read_society, read_society_step, write_society_step
from engine.society.workspaces.manifest import PACKED, manifest_key, read_manifest
from engine.spec import ExperimentSpec, parse_spec
from engine.storage.catalog import RUN_COLUMN
from engine.storage.run_layout import (
    ENV_SNAPSHOTS_DIR,
    INPUTS_DIR,
    LLM_CACHE_DIR,
    MANIFEST_FILE,
    REPLAY_DIR,
    SOCIETY_FILE,
    RunLayout,
    RunLocation,
    as_location,
    env_snapshot_kept,
    env_snapshot_prefix,
    history_key,
    is_url,
    run_store,
    trace_key,
)
from engine.storage.shards import shard_name
from engine.storage.store import Store, copy_keys

__all__ = ["ForkPoint", "ForkReport", "copy_env_as_of", "find_fork_point", "kept_tick", "materialize_fork", "plan_fork"]


@dataclass(frozen=True)
class ForkPoint:
    """A parent run and the committed tick a fork (or an as-of read) starts from."""

    parent: Path | str
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

    run_dir: Path | str
    agents: int
    workspace_bytes: int  #: bytes of agent workspaces copied (or packs linked)
    linked_files: int  #: replay, trace, artifact, cache and input keys copied (hard-linked on disk) from the parent
    seconds: float


def find_fork_point(parent: RunLocation, at_step: int) -> ForkPoint:
    """The parent's state at tick ``at_step``, checked to be there.

    Raises:
        RunError: ``parent`` holds no run.
        ForkError: a live driver holds the parent, or it does not keep that tick (its history, env
            snapshot or an agent's journal is gone: ``snapshots.keep``).
        SpecError: ``at_step`` outside the parent's committed ticks (path ``at_step``).
    """
    parent = as_location(parent)
    stored = read_society(parent)
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


def kept_tick(run_dir: RunLocation, step: int, *, start_time: datetime | None, through_txn: int, ticks_done: int,
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
    if snapshot is not None and not env_snapshot_kept(store, snapshot):
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
    root = RunLayout(Path(run_dir)).agents
    missing = [a for a in dict.fromkeys(agent_ids) if not workspace_kept(workspace_path(root, a), step, ticks_done)]
    if missing:
        raise ForkError(f"{run_dir}: tick {step} is not kept for agent(s) {missing[:10]} (no journal of tick {step + 1}); "
                        "raise snapshots.keep")
    return record


def plan_fork(parent: RunLocation, at_step: int, patch: dict[str, Any] | None = None) -> tuple[ForkPoint, ForkSpec]:
    """The fork point and the fork's checked spec (see :func:`~engine.society.fork.plan.fork_spec`)."""
    point = find_fork_point(parent, at_step)
    return point, fork_spec(point.spec, at_step, point.ticks_done, patch)


def materialize_fork(point: ForkPoint, fork: ForkSpec, run_dir: RunLocation) -> ForkReport:
    """Write ``run_dir`` (absent or empty; a path or URL) as the fork's run.

    Raises:
        ForkError: ``run_dir`` holds something, or is the parent.
        StorageError: the parent's replay cannot be read (for its run ids); nothing is written then.
    """
    started = time.perf_counter()
    run_dir = as_location(run_dir)
    if _same_run(run_dir, point.parent):
        raise ForkError("a fork needs its own run directory, not the parent's")
    source, target = run_store(point.parent), run_store(run_dir)
    if target.list_dir("") != ([], []):
        raise ForkError(f"{target.url} is not empty: a fork starts in a new run directory")
    parent_runs = _parent_runs(point)
    linked = _copy_published(point, source, target)
    linked += copy_keys(source, target, [*source.list_prefix(LLM_CACHE_DIR + "/"), *source.list_prefix(INPUTS_DIR + "/")])
    # The catalog, and the manifest (a changed served model warns).
    copy_keys(source, target, [f"{REPLAY_DIR}/_schema.json", MANIFEST_FILE])
    copy_env_as_of(source, target, point.record.status.env_snapshot)
    copied = 0
    workspaces = point.record.status.workspaces
    if (workspaces is not None) != (fork.spec.storage.workspaces == PACKED):
        raise ForkError(f"the parent keeps its workspaces {'in packs' if workspaces else 'in folders'}; a fork keeps them "
                        "the same way (storage.workspaces cannot change)")
    if workspaces is not None:  # packs never change: share them, and the manifest that lists them
        keys = [workspaces, *read_manifest(source, workspaces).reads]
        copy_keys(source, target, keys)
        copied += sum(source.size(key) for key in keys)
    for agent_id in point.agent_ids if workspaces is None else ():
        copied += copy_workspace_as_of(workspace_path(RunLayout(Path(point.parent)).agents, agent_id),
                                       workspace_path(RunLayout(Path(run_dir)).agents, agent_id), point.at_step, point.ticks_done)
    parent = point.parent if isinstance(point.parent, str) else str(point.parent.resolve())
    lineage = {"parent": parent, "at_step": point.at_step, "txn": point.record.txn,
               "parent_spec_hash": point.stored.get("spec_hash"), "parent_runs": parent_runs}
    target.set_json(SOCIETY_FILE, {**point.stored, "spec": fork.spec.model_dump(mode="json"),
                                   "spec_hash": fork.spec.spec_hash(), "fork": lineage}, indent=2)
    write_society_step(target, replace(point.record.status, status=RunStatus.PENDING, error=None,
                                       completed_steps=fork.completed_steps, updated_at=time.time()))
    return ForkReport(run_dir, len(point.agent_ids), copied, linked, time.perf_counter() - started)


def _same_run(a: Path | str, b: Path | str) -> bool:
    if is_url(a) or is_url(b):
        return str(a).rstrip("/") == str(b).rstrip("/")
    return Path(a).resolve() == Path(b).resolve()


def _copy_published(point: ForkPoint, source: Store, target: Store) -> int:
    """Copy what the parent's transactions up to the fork point published, their tick spans and history records."""
    records = History(point.parent).records(point.record.txn)
    keys = [f for record in records for f in record.files]
    keys += [trace_key(shard_name(k, "tick")) for k in range(1, point.at_step + 1)]
    copied = copy_keys(source, target, keys)
    copy_keys(source, target, [history_key(record.txn) for record in records])
    return copied


def copy_env_as_of(source: Store, target: Store, snapshot: str | None) -> None:
    """Copy ``source``'s ``env/`` keys into ``target`` with only the env snapshot ``snapshot`` (None: none).

    Read and written, never linked: env modules rewrite their own files in place.
    """
    keys = [k for k in source.list_prefix("env/") if not k.startswith(ENV_SNAPSHOTS_DIR + "/")]
    if snapshot is not None:
        keys += source.list_prefix(env_snapshot_prefix(snapshot))
    for key in keys:
        target.set(key, source.get(key))


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
