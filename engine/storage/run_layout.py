"""The on-disk layout of one run directory: every path and file name, defined once.

::

    <run_dir>/SOCIETY.json           written once: specs, env modules, spec hash
    <run_dir>/SOCIETY_STEP.json      every commit: where the run stands (the commit point)
    <run_dir>/LEASE.json             the driver's lease
    <run_dir>/replay/<dataset>/*.parquet
    <run_dir>/trace/*.jsonl
    <run_dir>/packs/txn_<n>/*.pack   packed runs: one pack of agent workspaces per batch and transaction
    <run_dir>/workspaces/txn_<n>.json   packed runs: the workspace manifest a commit names
    <run_dir>/agents/                ``dir`` runs: one workspace folder per agent
    <run_dir>/artifacts/             questionnaire, ask and intervene results
    <run_dir>/env/                   env module workspaces, _snapshots/, _codegen_cache/, _world_description.json
    <run_dir>/inputs/                files a spec may name (city_file, ...)
    <run_dir>/llm_cache/             the default response cache
    <run_dir>/MANIFEST.json          versions, commit, seeds, served models
    <run_dir>/history/txn_<n>.json   one record per committed transaction (forks, as-of interviews)
    <run_dir>/scratch/               a step's temporary folders (as-of workspaces), removed when it ends

A sweep root holds one such directory per cell (:mod:`engine.storage.sweep_layout`).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

from engine.storage.store import LocalStore, Store, open_store

__all__ = [
    "ARTIFACTS_DIR",
    "ENV_SNAPSHOTS_DIR",
    "ENV_SNAPSHOT_DONE",
    "HISTORY_DIR",
    "INPUTS_DIR",
    "LLM_CACHE_DIR",
    "LEASE_FILE",
    "MANIFEST_FILE",
    "PACKS_DIR",
    "REPLAY_DIR",
    "SOCIETY_FILE",
    "SOCIETY_STEP_FILE",
    "STAGED_PREFIXES",
    "TRACE_DIR",
    "WORLD_DESCRIPTION_FILE",
    "WORKSPACES_DIR",
    "RunLayout",
    "RunLocation",
    "artifact_key",
    "as_of_scratch",
    "env_snapshot_kept",
    "env_snapshot_prefix",
    "as_location",
    "history_key",
    "is_url",
    "replay_key",
    "resolve_location",
    "run_child",
    "run_name",
    "run_store",
    "trace_key",
]

#: Where a run is: a local path, or a URL of an fsspec filesystem (``s3://bucket/prefix``, ``memory://run``).
RunLocation = str | os.PathLike[str]

#: The replay datasets' directory name (also in the reader's sweep path patterns).
REPLAY_DIR = "replay"
#: What a run (or a sweep root) ran on: versions, commit, seeds, served models (``engine.society.run.manifest``).
MANIFEST_FILE = "MANIFEST.json"
#: The trace shards' directory name.
TRACE_DIR = "trace"
#: Packed runs: the agents' workspace packs (store keys ``packs/txn_<n>/...``).
PACKS_DIR = "packs"
#: Packed runs: the workspace manifests (store keys ``workspaces/txn_<n>.json``).
WORKSPACES_DIR = "workspaces"
#: Written once: specs, env module types and kwargs, spec hash.
SOCIETY_FILE = "SOCIETY.json"
#: Where the run stands, rewritten by every commit (the commit point).
SOCIETY_STEP_FILE = "SOCIETY_STEP.json"
#: Which driver holds the run.
LEASE_FILE = "LEASE.json"
#: One record per committed transaction (``history/txn_<n>.json``).
HISTORY_DIR = "history"
#: Results of questionnaire, ask and intervene steps.
ARTIFACTS_DIR = "artifacts"
#: The default LLM response cache.
LLM_CACHE_DIR = "llm_cache"
#: Files a spec may name (``city_file``, ...).
INPUTS_DIR = "inputs"


#: The world description the LLM wrote for the run, once (:mod:`engine.env.world`).
WORLD_DESCRIPTION_FILE = "env/_world_description.json"
#: Committed env state snapshots, one folder per transaction (``env/_snapshots/txn_<n>/...``).
ENV_SNAPSHOTS_DIR = "env/_snapshots"
#: Written last into each env snapshot: the snapshot is whole.
ENV_SNAPSHOT_DONE = "_complete.json"
#: Where a transaction's staged keys can be (:mod:`engine.storage.staging`).
STAGED_PREFIXES = (f"{REPLAY_DIR}/", f"{TRACE_DIR}/", f"{ARTIFACTS_DIR}/")


def replay_key(dataset: str, shard: str) -> str:
    """The store key of replay shard ``shard`` of ``dataset``."""
    return f"{REPLAY_DIR}/{dataset}/{shard}.parquet"


def trace_key(shard: str) -> str:
    """The store key of trace shard ``shard``."""
    return f"{TRACE_DIR}/{shard}.jsonl"


def env_snapshot_prefix(name: str) -> str:
    """The prefix of env snapshot ``name``'s keys (``env/_snapshots/txn_<n>/``)."""
    return f"{ENV_SNAPSHOTS_DIR}/{name}/"


def env_snapshot_kept(store: Store, name: str) -> bool:
    """Whether the run keeps env snapshot ``name`` whole (its last key written; a run of an older engine: its folder)."""
    prefix = env_snapshot_prefix(name)
    if store.exists(prefix + ENV_SNAPSHOT_DONE):
        return True
    return store.local_root is not None and (store.local_root / prefix).is_dir()


def as_of_scratch(txn: int, token: str) -> str:
    """The prefix (no trailing "/") of the scratch of an ``as_of_step`` step of transaction ``txn`` (``token``: unique)."""
    return f"scratch/as_of-{txn:06d}-{token}"


def history_key(txn: int) -> str:
    """The store key of transaction ``txn``'s history record."""
    return f"{HISTORY_DIR}/txn_{txn:06d}.json"


def artifact_key(name: str) -> str:
    """The store key of the artifact ``name`` (e.g. ``questionnaire-002-mood.json``)."""
    return f"{ARTIFACTS_DIR}/{name}"


def is_url(location: RunLocation | Store) -> bool:
    """Whether ``location`` is a URL with a scheme other than ``file`` (a run not on local disk)."""
    return isinstance(location, str) and "://" in location and not location.lower().startswith("file://")


def as_location(location: RunLocation) -> Path | str:
    """``location`` as a run is kept: a URL as its string (a ``Path`` would fold its ``//``), anything else a Path."""
    return str(location) if is_url(location) else Path(location)


def resolve_location(location: RunLocation) -> Path | str:
    """A location a user typed, made absolute: a URL as it is, a path resolved against the working directory."""
    where = as_location(location)
    return where if isinstance(where, str) else where.resolve()


def run_child(location: RunLocation, name: str) -> Path | str:
    """The location of ``name`` inside the run at ``location`` (``<run>/llm_cache``), a path or a URL like it."""
    where = as_location(location)
    return f"{where.rstrip('/')}/{name}" if isinstance(where, str) else where / name


def run_name(location: RunLocation) -> str:
    """The run's own name: the last part of its path or URL."""
    return str(location).rstrip("/").rpartition("/")[2]


def run_store(location: RunLocation | Store) -> Store:
    """The store of the run at ``location``: every run document, shard, pack and history record is a key of it.

    A local path is a :class:`~engine.storage.store.LocalStore` that fsyncs each value (a committed tick survives a
    machine crash); a URL opens the fsspec store it names (one per URL and process: opening an s3fs filesystem costs
    more than the reads that follow). A store is returned as it is.

    Raises:
        StoreUrlError: the URL's scheme is unknown or its package is not installed.
    """
    if isinstance(location, Store):
        return location
    if is_url(location):
        return _url_store(str(location))
    local = open_store(location).local_root  # a path or a file:// URL
    assert local is not None
    return LocalStore(local, durable=True)


@functools.lru_cache(maxsize=64)
def _url_store(url: str) -> Store:
    return open_store(url)


@dataclass(frozen=True)
class RunLayout:
    """The paths of the run directory ``root``; nothing is created or read.

    Args:
        root: the run directory.
    """

    root: Path

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(self.root))

    @property
    def society_file(self) -> Path:
        """``SOCIETY.json``: written once (specs, env module types and kwargs, spec hash)."""
        return self.root / SOCIETY_FILE

    @property
    def society_step_file(self) -> Path:
        """``SOCIETY_STEP.json``: where the run stands, rewritten by every commit."""
        return self.root / SOCIETY_STEP_FILE

    @property
    def manifest_file(self) -> Path:
        """``MANIFEST.json``: versions, commit, seeds and served models, rewritten at each driver's end."""
        return self.root / MANIFEST_FILE

    @property
    def lease_file(self) -> Path:
        """``LEASE.json``: which driver holds the run."""
        return self.root / LEASE_FILE

    @property
    def replay(self) -> Path:
        """Replay datasets, one directory of Parquet shards each, and their catalog."""
        return self.root / REPLAY_DIR

    @property
    def trace(self) -> Path:
        """Trace span shards (JSONL)."""
        return self.root / TRACE_DIR

    @property
    def agents(self) -> Path:
        """The agents' workspaces."""
        return self.root / "agents"

    @property
    def artifacts(self) -> Path:
        """Results of questionnaire, ask and intervene steps (JSON)."""
        return self.root / ARTIFACTS_DIR

    @property
    def env(self) -> Path:
        """The env modules' workspaces, snapshots and the run-local CodeGen cache."""
        return self.root / "env"

    @property
    def env_snapshots(self) -> Path:
        """Committed env state snapshots, one directory per transaction."""
        return self.root / ENV_SNAPSHOTS_DIR

    @property
    def codegen_cache(self) -> Path:
        """The CodeGen template cache kept in the run (when no shared one is configured)."""
        return self.env / "_codegen_cache"

    @property
    def world_description(self) -> Path:
        """The world description the LLM wrote for the run, once (:mod:`engine.env.world`)."""
        return self.root / WORLD_DESCRIPTION_FILE

    @property
    def inputs(self) -> Path:
        """Files a spec may name (``MobilitySpace.city_file``, ...)."""
        return self.root / INPUTS_DIR

    @property
    def history(self) -> Path:
        """One record per committed transaction: the status it committed and the files it published."""
        return self.root / HISTORY_DIR

    @property
    def scratch(self) -> Path:
        """Temporary folders of one step that workers must see; each goes when its step ends."""
        return self.root / "scratch"

    def as_of_agents(self, txn: int, token: str) -> Path:
        """The agents' workspaces as an ``as_of_step`` step of transaction ``txn`` reads them (``token``: unique)."""
        return self.root / as_of_scratch(txn, token) / "agents"

    @property
    def llm_cache(self) -> Path:
        """The default LLM response cache."""
        return self.root / LLM_CACHE_DIR

    def artifact(self, name: str) -> Path:
        """The artifact file ``name`` (e.g. ``questionnaire-002-mood.json``)."""
        return self.artifacts / name
