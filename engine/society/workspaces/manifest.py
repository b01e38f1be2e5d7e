"""A run's agent workspaces in packs (the spec's ``storage.workspaces: packed``, the default).

Every tick each batch writes one pack (:mod:`engine.agent.packed`) holding all of its agents; the
driver then writes a *workspace manifest*, ``workspaces/txn_<n>.json``, naming the pack that holds
each agent and every pack their files read from, and the commit point (``SOCIETY_STEP.json``)
names that manifest (``SocietyStep.workspaces``). Readers trust only the manifest the committed
status names, so a pack of a tick that never committed is simply never read, and collected later.
The history keeps each tick's status, so a kept tick's manifest is how forks and as-of reads find
the agents as that tick left them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.agent.packed import PackedWorkspaces, export_workspace
from engine.agent.registry import resolve_agent
from engine.agent.workspace import AgentWorkspace, DirWorkspace, workspace_name, workspace_path
from engine.agent.workspace_in_memory import MemoryWorkspace
from engine.errors import ForkError, RunError, StoreKeyNotFoundError
from engine.society.history import TICK, History, kept_from
from engine.society.status import read_society_step
from engine.storage.packs import PackWriter
from engine.storage.run_layout import PACKS_DIR, WORKSPACES_DIR, RunLayout, RunLocation, run_store
from engine.storage.store import Store

__all__ = [
    "PACKED",
    "AgentSource",
    "PackedAgents",
    "WorkspaceManifest",
    "agent_workspace",
    "create_packed_agents",
    "drop_uncommitted",
    "export_as_of",
    "manifest_key",
    "pack_key",
    "read_manifest",
    "started_key",
    "write_manifest",
]

PACKED = "packed"  #: ``storage.workspaces`` of packed runs (the other is ``dir``)


def pack_key(txn: int, batch: int, token: str) -> str:
    """The key of batch ``batch``'s pack in transaction ``txn`` (``token``: unique per attempt)."""
    return f"{PACKS_DIR}/txn_{txn:06d}/b{batch:05d}-{token}.pack"


def started_key(pack: str) -> str:
    """The marker a batch leaves beside its pack when it starts (a second start is a retry)."""
    return f"{pack}.started"


def manifest_key(txn: int) -> str:
    return f"{WORKSPACES_DIR}/txn_{txn:06d}.json"


def _ranges(ids: Sequence[int]) -> list[list[int]]:
    out: list[list[int]] = []
    for agent_id in sorted(ids):
        if out and out[-1][1] == agent_id - 1:
            out[-1][1] = agent_id
        else:
            out.append([agent_id, agent_id])
    return out


@dataclass(frozen=True)
class WorkspaceManifest:
    """Which pack holds each agent after one transaction, and every pack their files read from."""

    txn: int
    packs: Mapping[str, tuple[int, ...]]  #: pack -> the agents it lists
    reads: tuple[str, ...]  #: every pack the agents' files read from (what collection keeps)

    def where(self) -> dict[int, str]:
        return {agent_id: pack for pack, ids in self.packs.items() for agent_id in ids}

    def to_json(self) -> dict[str, Any]:
        return {"txn": self.txn, "packs": {p: _ranges(ids) for p, ids in sorted(self.packs.items())}, "reads": sorted(self.reads)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> WorkspaceManifest:
        packs = {p: tuple(i for lo, hi in ranges for i in range(lo, hi + 1)) for p, ranges in data["packs"].items()}
        return cls(int(data["txn"]), packs, tuple(data["reads"]))


def write_manifest(store: Store, manifest: WorkspaceManifest) -> str:
    """Store ``manifest`` (before the commit point that names it); returns its key."""
    key = manifest_key(manifest.txn)
    store.set(key, json.dumps(manifest.to_json(), separators=(",", ":")).encode())
    return key


def read_manifest(store: Store, key: str) -> WorkspaceManifest:
    """Raises: RunError: the manifest a committed status names is missing or unreadable."""
    try:
        return WorkspaceManifest.from_json(json.loads(store.get(key)))
    except StoreKeyNotFoundError as error:
        raise RunError(f"the workspace manifest {key} of {store.url} is missing: {error}") from None
    except (ValueError, KeyError, TypeError) as error:
        raise RunError(f"the workspace manifest {key} of {store.url} is unreadable: {error}") from None


def create_packed_agents(store: Store, specs: Iterable[dict[str, Any]], *, txn: int, batch_size: int,
                         on_created: Callable[[int], None] | None = None) -> WorkspaceManifest:
    """Write every agent's fresh workspace into packs of ``batch_size`` agents (transaction ``txn``'s keys);
    ``on_created`` hears how many are written so far, at the start and after each pack."""
    specs = list(specs)
    packs: dict[str, tuple[int, ...]] = {}
    created = 0
    if on_created is not None:
        on_created(created)
    for batch, first in enumerate(range(0, len(specs), batch_size)):
        name = pack_key(txn, batch, "create")
        writer, packed = PackWriter(name, txn), PackedWorkspaces(store)
        ids = []
        for spec in specs[first:first + batch_size]:
            agent_id = int(spec["id"])
            ws = MemoryWorkspace(workspace_name(agent_id))
            resolve_agent(spec["type"]).create(ws, agent_id=agent_id, profile=spec["profile"], config=spec["config"])
            packed.pack(writer, agent_id, ws)
            ids.append(agent_id)
        writer.write(store)
        packs[name] = tuple(ids)
        created += len(ids)
        if on_created is not None:
            on_created(created)
    return WorkspaceManifest(txn, packs, tuple(packs))


@dataclass(frozen=True)
class AgentSource:
    """Where readers (questionnaires, interviews) find the agents' workspaces: packs, or a folder per agent.

    Args:
        folders: the folder that holds a folder per agent (``agents/``, or an as-of read's copies).
        run_dir: packed: the run whose store holds the packs.
        packs: packed: the pack that holds each agent.
    """

    folders: Path | None = None
    run_dir: RunLocation | None = None
    packs: Mapping[int, str] | None = None

    def opener(self) -> Callable[[int], AgentWorkspace | None]:
        """A function from an agent id to its workspace (None: no such agent here); packs are read once per opener."""
        if self.packs is not None:
            assert self.run_dir is not None, "packs need their run directory"
            packed, packs = PackedWorkspaces(run_store(self.run_dir)), self.packs
            return lambda agent_id: packed.load(agent_id, packs[agent_id]) if agent_id in packs else None
        assert self.folders is not None, "give folders or packs"
        root = self.folders

        def folder(agent_id: int) -> AgentWorkspace | None:
            path = workspace_path(root, agent_id)
            return DirWorkspace(path) if (path / "config.json").exists() else None

        return folder

    @classmethod
    def of_run(cls, run_dir: RunLocation) -> AgentSource:
        """A run's agents as its last commit left them, in packs or in folders (``SOCIETY_STEP.json`` tells)."""
        status = read_society_step(run_dir)
        if status is not None and status.workspaces is not None:
            return cls(run_dir=run_dir, packs=read_manifest(run_store(run_dir), status.workspaces).where())
        return cls(folders=RunLayout(Path(run_dir)).agents)

    @property
    def where(self) -> str:
        return str(self.run_dir if self.packs is not None else self.folders)


class PackedAgents:
    """A packed run's agents as its driver sees them: the manifest the last commit named, and the next one.

    Args:
        run_dir: the run directory.
        snapshots_keep: the spec's ``snapshots.keep``: past ticks whose packs stay (None: every tick's).
    """

    def __init__(self, run_dir: RunLocation, snapshots_keep: int | None = None) -> None:
        self.run_dir, self.snapshots_keep = run_dir, snapshots_keep
        self.store = run_store(run_dir)
        self.manifest: WorkspaceManifest | None = None
        self._where: dict[int, str] = {}  #: the manifest's where(), built once per manifest (every batch asks)

    def open(self, committed: str | None, specs: list[dict[str, Any]], *, txn: int, batch_size: int,
             on_created: Callable[[int], None] | None = None) -> str:
        """Load the committed manifest, or (``committed`` None: a fresh run) create every agent, telling ``on_created``
        how many are so far; returns the manifest's key."""
        if committed is None:
            self.manifest = create_packed_agents(self.store, specs, txn=txn, batch_size=batch_size, on_created=on_created)
            committed = write_manifest(self.store, self.manifest)
        else:
            self.manifest = read_manifest(self.store, committed)
        self._where = self.manifest.where()
        return committed

    def packs_of(self, agent_ids: Iterable[int]) -> dict[int, str]:
        """The pack holding each of ``agent_ids`` (those the manifest lists)."""
        assert self.manifest is not None, "open() first"
        return {a: self._where[a] for a in agent_ids if a in self._where}

    def source(self, agent_ids: Iterable[int]) -> AgentSource:
        """Where readers find ``agent_ids`` as the last commit left them."""
        return AgentSource(run_dir=self.run_dir, packs=self.packs_of(agent_ids))

    def forget(self, agent_ids: Iterable[int], step_count: int) -> None:
        """At a run's end: delete the packs that no tick ``snapshots.keep`` keeps reads from (its manifests stay, small)."""
        if self.snapshots_keep is None or self.manifest is None:
            return
        oldest = kept_from(step_count, self.snapshots_keep)
        current = self.manifest
        kept = [read_manifest(self.store, r.status.workspaces) for r in History(self.run_dir).records(current.txn)
                if r.kind == TICK and r.step >= oldest and r.status.workspaces is not None and r.txn != current.txn]
        if oldest == 0 and self.store.exists(manifest_key(0)):
            kept.append(read_manifest(self.store, manifest_key(0)))  # tick 0: the agents as created
        wanted = {pack for m in (*kept, current) for pack in m.reads}
        for key in self.store.list_prefix(f"{PACKS_DIR}/"):
            if key.endswith(".pack") and key not in wanted and _txn_of(key) <= current.txn:
                self.store.delete(key)
                self.store.delete(started_key(key))

    def stage(self, txn: int, batches: Iterable[tuple[str | None, tuple[int, ...], tuple[str, ...]]]) -> str:
        """Write transaction ``txn``'s manifest from its batches' ``(pack, agent ids, packs read)``; returns its key.

        Raises:
            RunError: a batch that wrote no pack.
        """
        packs: dict[str, tuple[int, ...]] = {}
        reads: set[str] = set()
        for pack, ids, read in batches:
            if pack is None:
                raise RunError(f"a batch of transaction {txn} wrote no pack for agents {list(ids)[:10]}")
            packs[pack] = ids
            reads.update(read)
        self.manifest = WorkspaceManifest(txn, packs, tuple(sorted(reads)))
        self._where = self.manifest.where()
        return write_manifest(self.store, self.manifest)


def agent_workspace(run_dir: RunLocation, agent_id: int) -> AgentWorkspace | None:
    """One agent's workspace as the run's last commit left it, packed or in a folder (None: no such agent).

    For reading only: nothing is written back.
    """
    return AgentSource.of_run(run_dir).opener()(agent_id)


def export_as_of(store: Store, manifest: WorkspaceManifest, agent_ids: Iterable[int], agents_root: Path) -> int:
    """Write the agents' workspaces as ``manifest`` left them as folders under ``agents_root``; returns the bytes.

    Raises:
        ForkError: an agent the manifest does not list.
    """
    where, packed, written = manifest.where(), PackedWorkspaces(store), 0
    for agent_id in agent_ids:
        if agent_id not in where:
            raise ForkError(f"the workspace manifest of transaction {manifest.txn} lists no agent {agent_id}")
        written += export_workspace(packed.load(agent_id, where[agent_id]), workspace_path(agents_root, agent_id))
    return written


def drop_uncommitted(store: Store, committed_txn: int) -> int:
    """Delete the packs, markers and manifests of transactions after ``committed_txn`` (attempts that never
    committed: nothing reads them); returns how many objects went."""
    removed = 0
    for prefix in (f"{PACKS_DIR}/", f"{WORKSPACES_DIR}/"):
        for key in store.list_prefix(prefix):
            if _txn_of(key) > committed_txn:
                store.delete(key)
                removed += 1
    return removed


def _txn_of(key: str) -> int:
    """The transaction of a pack (``packs/txn_000003/...``) or manifest (``workspaces/txn_000003.json``) key."""
    part = key.split("/")[1]
    return int(part[4:10])
