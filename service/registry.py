"""The experiment registry: one JSON record per experiment, kept on disk so it survives restarts.

Layout under the service's data directory::

    experiments/<id>.json         the record (replaced atomically on every update): status, progress, usage
    experiments/<id>.spec.json    its validated spec, written when it is created or changed (never on a status change),
                                  without the rows of the tables its populations name (``from``) ...
    experiments/<id>.rows-<N>.json   ... which are kept once each, beside it
    runs/<id>/              the run directory the engine writes into (unless POLIS_RUN_STORE names a URL:
                            then runs are ``<url>/<id>`` in object storage)

Restarts: a record found ``queued`` when the registry loads is queued again; one found ``running``
(its service process died mid-run) or ``interrupted`` with ``resume_on_start`` (its service shut
down cleanly mid-run) is queued again to resume from its last committed transaction, and its
``resumed_after_restart`` counts it; but one whose cancel was asked for ends ``cancelled``. The app hands every ``queued`` record to the submitter at
start-up, so no record claims to wait or run when nothing will run it.

Memory holds the records, never their specs: a spec is read from its files when it is needed (to run, resume, fork,
add steps or show it), so a population table of a million rows costs its submit a file, not every status change a
rewrite nor the registry a copy.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from engine.api import ExperimentSpec, as_location, atomic_write_text, read_json, run_child, run_store
from engine.errors import StorageError
from engine.run_status import RunStatus
from service.admission.auth import LOCAL_ADMIN, Principal
from service.errors import ExperimentBusyError, ExperimentNotFoundError, IdempotencyConflictError
from service.schemas import (
    ExperimentAccepted,
    ExperimentBrief,
    ExperimentDetail,
    ExperimentStatus,
    ForkedFrom,
    Progress,
    Usage,
    without_server_paths,
)

__all__ = [
    "ACTIVE_STATUSES",
    "ExperimentRecord",
    "ExperimentRegistry",
    "Idempotency",
    "make_data_dirs",
    "utc_now",
]

logger = logging.getLogger(__name__)

#: Statuses of an experiment some service process is (or was) working on.
ACTIVE_STATUSES: frozenset[RunStatus] = frozenset({RunStatus.QUEUED, RunStatus.RUNNING})


def utc_now() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


class Idempotency(BaseModel):
    """A submit's ``Idempotency-Key`` (unique per owner) and the SHA-256 of the body it came with."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    key: str
    body_sha256: str


class ExperimentRecord(BaseModel):
    """What the service knows about one experiment. Frozen: updates make a new record."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str  #: short uuid hex
    name: str
    owner: str = LOCAL_ADMIN.owner  #: who submitted it (``service.admission.auth``); only they and admins see it
    status: ExperimentStatus = RunStatus.QUEUED
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    ticks_done: int = 0
    ticks_total: int = 0
    agent_steps_done: int = 0
    agent_steps_total: int = 0
    #: What the run is doing now, as its progress says (``creating workspaces``, ``tick`` ...; null: not running).
    phase: str | None = None
    #: The last committed tick's token telemetry by tier (``RunProgress.tokens``; null before the first tick).
    tokens: dict[str, dict[str, Any]] | None = None
    #: LLM usage and wall time, known once the run has ended.
    llm_calls: int | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    duration_s: float | None = None
    error: str | None = None
    #: How many times a service restart found this experiment mid-run and queued it to resume.
    resumed_after_restart: int = 0
    #: Stopped by a clean service shutdown (status ``interrupted``): the next start resumes it.
    resume_on_start: bool = False
    #: A cancel was asked for while it ran: it ends ``cancelled``, even if the service stops before the run unwinds.
    cancel_requested: bool = False
    run_dir: Path | str  #: a local directory, or a URL of object storage (``s3://bucket/prefix/<id>``)
    #: Set for a fork (``POST /experiments/{id}/fork``): its run directory is made from the parent's when it first runs.
    forked_from: ForkedFrom | None = None
    #: The submit's ``Idempotency-Key`` and the SHA-256 of its body: a retry with both returns this experiment.
    idempotency: Idempotency | None = None
    #: The ``Idempotency-Key`` of every ``POST .../steps`` that added steps, with its body's SHA-256.
    steps_keys: tuple[Idempotency, ...] = ()

    @field_validator("run_dir", mode="before")
    @classmethod
    def _location(cls, value: Any) -> Path | str:
        return as_location(value)

    # ---- as the HTTP API shows it ----------------------------------------------------------------------
    def brief(self) -> ExperimentBrief:
        """The record as listed."""
        return ExperimentBrief(**self._brief_fields())

    def accepted(self, dashboard_link: str | None = None) -> ExperimentAccepted:
        """The record as a submit, fork, added steps, resume or cancel leaves it (``dashboard_link``: the cluster's
        experiment page, if any)."""
        return ExperimentAccepted(**self._accepted_fields(dashboard_link))

    def detail(self, spec: dict[str, Any], dashboard_link: str | None = None) -> ExperimentDetail:
        """The record in full: its spec (:meth:`ExperimentRegistry.shown_spec`) and, once the run has ended, its usage
        (``dashboard_link`` as :meth:`accepted`)."""
        usage = None
        calls, tokens_in, tokens_out, seconds = self.llm_calls, self.input_tokens, self.output_tokens, self.duration_s
        if calls is not None and tokens_in is not None and tokens_out is not None and seconds is not None:
            usage = Usage(llm_calls=calls, input_tokens=tokens_in, output_tokens=tokens_out, duration_s=seconds)
        return ExperimentDetail(**self._accepted_fields(dashboard_link), usage=usage, spec=spec)

    def _brief_fields(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "owner": self.owner,
            "status": self.status,
            "created_at": self.created_at,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "progress": Progress(
                ticks_done=self.ticks_done,
                ticks_total=self.ticks_total,
                agent_steps_done=self.agent_steps_done,
                agent_steps_total=self.agent_steps_total,
                phase=self.phase if self.status == RunStatus.RUNNING else None,
                tokens=self.tokens,
            ),
            "error": without_server_paths(self.error, self.run_dir) if self.error else self.error,
            "resumed_after_restart": self.resumed_after_restart,
            "forked_from": self.forked_from,
        }

    def _accepted_fields(self, dashboard_link: str | None) -> dict[str, Any]:
        return {**self._brief_fields(), "dashboard_link": dashboard_link, "report": f"/experiments/{self.id}/report",
                "events": f"/experiments/{self.id}/events"}


def make_data_dirs(data_dir: Path, run_store: str | None = None) -> Path | str:
    """Make the service's data directory's folders (records, and runs unless ``run_store`` keeps them elsewhere);
    return where run directories go. ``polis serve`` calls it before it serves, so that an unusable directory is one
    line, not a traceback at startup.

    Raises:
        StorageError: the folders cannot be made (a file of that name, no permission ...).
    """
    runs: Path | str = as_location(run_store) if run_store else data_dir / "runs"
    try:
        (data_dir / "experiments").mkdir(parents=True, exist_ok=True)
        if isinstance(runs, Path):
            runs.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise StorageError(f"cannot use {data_dir} as the service's data directory (POLIS_DATA_DIR, --data-dir): "
                           f"{error.strerror or error}") from None
    return runs


class ExperimentRegistry:
    """Experiment records in memory, each write persisted atomically to ``data_dir/experiments``.

    Args:
        data_dir: the service's data directory; created if missing.
        run_store: where run directories go when not under ``data_dir/runs``: a URL (``s3://bucket/prefix``).

    Raises:
        StorageError: the directories cannot be created.
    """

    def __init__(self, data_dir: Path, *, run_store: str | None = None) -> None:
        self._records_dir = data_dir / "experiments"
        self._runs_dir: Path | str = make_data_dirs(data_dir, run_store)
        # Progress callbacks may arrive from other threads; one lock keeps memory and disk in step.
        self._lock = threading.RLock()
        self._records: dict[str, ExperimentRecord] = {}
        self._by_key: dict[tuple[str, str], str] = {}  #: (owner, idempotency key) -> experiment id
        self._watchers: list[Callable[[ExperimentRecord], None]] = []
        self._file_locks: dict[str, threading.Lock] = {}
        self._load()

    def watch(self, callback: Callable[[ExperimentRecord], None]) -> None:
        """Call ``callback`` with each record a write gives a new status, under the registry's lock (keep it short)."""
        self._watchers.append(callback)

    def submitted(self, owner: str, idempotency: Idempotency) -> ExperimentRecord | None:
        """The experiment ``owner`` submitted with this ``Idempotency-Key`` and body, or None if the key is new.

        Raises:
            IdempotencyConflictError: the owner used the key with another body.
        """
        with self._lock:
            return self._submitted(owner, idempotency)

    def _submitted(self, owner: str, idempotency: Idempotency) -> ExperimentRecord | None:
        experiment_id = self._by_key.get((owner, idempotency.key))
        record = self._records.get(experiment_id) if experiment_id is not None else None
        if record is None:
            return None
        assert record.idempotency is not None
        if record.idempotency.body_sha256 != idempotency.body_sha256:
            raise IdempotencyConflictError(f"the Idempotency-Key {idempotency.key!r} was used for another body "
                                           f"(experiment {record.id}); use a new key for a new experiment")
        return record

    def create_once(self, spec: ExperimentSpec, owner: str, idempotency: Idempotency) -> tuple[ExperimentRecord, bool]:
        """:meth:`create`, unless ``owner`` made an experiment with this ``Idempotency-Key`` and body before.

        Returns:
            The new record and True; or the one the same key and body made (by a concurrent or an earlier
            request, also before a restart) and False.

        Raises:
            IdempotencyConflictError: the owner used the key with another body.
        """
        record = self._new_record(spec, owner, None, idempotency)
        with self._lock:
            if (earlier := self._submitted(owner, idempotency)) is not None:
                return earlier, False
            record = self._remember(record)
        self._persist_new(record, spec)
        return record, True

    def steps_added(self, experiment_id: str, idempotency: Idempotency) -> bool:
        """Whether added steps with this ``Idempotency-Key`` and body were taken already (their retry is a no-op).

        Raises:
            IdempotencyConflictError: the key was used for other steps on this experiment.
        """
        with self._lock:
            for earlier in self.get(experiment_id).steps_keys:
                if earlier.key == idempotency.key:
                    if earlier.body_sha256 != idempotency.body_sha256:
                        raise IdempotencyConflictError(
                            f"the Idempotency-Key {idempotency.key!r} was used for other steps on experiment "
                            f"{experiment_id}; use a new key for new steps")
                    return True
            return False

    def add_steps(self, experiment_id: str, spec: ExperimentSpec,
                  idempotency: Idempotency | None) -> tuple[ExperimentRecord, bool]:
        """Make ``spec`` (the stored one with steps appended) the experiment's, once: under one lock with the check
        that the key is new (else: the record and False) and that the experiment is not queued or running.

        Raises:
            ExperimentBusyError: it is queued or running (a concurrent request may have just queued it).
            IdempotencyConflictError: the key was used for other steps.
        """
        with self._lock:
            record = self.get(experiment_id)
            if idempotency is not None and self.steps_added(experiment_id, idempotency):
                return record, False
            if record.status in ACTIVE_STATUSES:
                raise ExperimentBusyError(record.id, record.status, "add steps to")
            keys = (*record.steps_keys, idempotency) if idempotency is not None else record.steps_keys
            self.set_spec(experiment_id, spec)
            return self.update(experiment_id, steps_keys=keys), True

    def create(self, spec: ExperimentSpec, owner: str = LOCAL_ADMIN.owner, forked_from: ForkedFrom | None = None) -> ExperimentRecord:
        """Register a new experiment as ``queued`` and persist it.

        Args:
            spec: the validated spec.
            owner: who submitted it.
            forked_from: a fork's parent and tick (None: a new run).

        Returns:
            The new record, with a fresh id and its run directory path (not yet created).
        """
        record = self._new_record(spec, owner, forked_from, None)
        with self._lock:
            record = self._remember(record)
        self._persist_new(record, spec)
        return record

    # A new record is built and written outside the registry's lock (its spec's dump, the write's fsync), so
    # concurrent submits do not queue behind each other's disk; under the lock it only takes its id and key.
    def _new_record(self, spec: ExperimentSpec, owner: str, forked_from: ForkedFrom | None,
                    idempotency: Idempotency | None) -> ExperimentRecord:
        ticks = spec.total_ticks()
        n_agents = len(spec.agents) + sum(population.size for population in spec.population)
        experiment_id = uuid.uuid4().hex[:12]
        return ExperimentRecord(
            id=experiment_id,
            name=spec.name,
            owner=owner,
            created_at=utc_now(),
            ticks_total=ticks,
            agent_steps_total=ticks * n_agents,
            run_dir=run_child(self._runs_dir, experiment_id),
            forked_from=forked_from,
            idempotency=idempotency,
        )

    def _remember(self, record: ExperimentRecord) -> ExperimentRecord:
        """Take ``record`` into memory under its id (a fresh one on a clash); under the lock."""
        while record.id in self._records:
            fresh = uuid.uuid4().hex[:12]
            record = record.model_copy(update={"id": fresh, "run_dir": run_child(self._runs_dir, fresh)})
        self._index(record)
        return record

    def _persist_new(self, record: ExperimentRecord, spec: ExperimentSpec) -> None:
        """Write a record :meth:`_remember` took, its spec first; if a write fails, forget it again and raise."""
        try:
            self._write_spec(record.id, spec.model_dump(mode="json"))
            with self._file_lock(record.id):
                latest = self._records.get(record.id)  # an update may have come first: write what is newest
                if latest is not None:
                    atomic_write_text(self._path(record.id), latest.model_dump_json(indent=2))
        except StorageError:
            with self._lock:
                self._records.pop(record.id, None)
                if record.idempotency is not None:
                    self._by_key.pop((record.owner, record.idempotency.key), None)
            raise

    def _file_lock(self, experiment_id: str) -> threading.Lock:
        """The lock every write and the removal of one record's file hold, so they land in the order they happened."""
        return self._file_locks.setdefault(experiment_id, threading.Lock())

    def spec(self, experiment_id: str) -> dict[str, Any]:
        """The experiment's validated spec, as JSON-ready data, with its tables' rows (read from its files).

        Raises:
            ExperimentNotFoundError: no such experiment.
            StorageError: its spec's files cannot be read.
        """
        data = self.shown_spec(experiment_id)
        populations = data.get("population") or []
        for index, population in enumerate(populations):
            rows = self._rows_path(experiment_id, index)
            if rows.exists():
                populations[index] = {**population, "rows": read_json(rows)}
        return data

    def shown_spec(self, experiment_id: str) -> dict[str, Any]:
        """The spec as ``GET /experiments/{id}`` shows it: a population that names its table (``from``) without the
        table's rows, so that the answer stays small and the spec can be submitted again as it is.

        Raises:
            ExperimentNotFoundError: no such experiment.
            StorageError: its spec's file cannot be read.
        """
        self.get(experiment_id)
        data = read_json(self._spec_path(experiment_id))
        assert isinstance(data, dict)
        return data

    def set_spec(self, experiment_id: str, spec: ExperimentSpec) -> None:
        """Make ``spec`` the experiment's (appended steps, a raised budget, changed run options).

        Raises:
            ExperimentNotFoundError: no such experiment.
            StorageError: it cannot be written.
        """
        self.get(experiment_id)
        self._write_spec(experiment_id, spec.model_dump(mode="json"))

    def _write_spec(self, experiment_id: str, data: dict[str, Any]) -> None:
        """Write a spec's files: each table's rows once (unchanged rows are not written again), then the rest."""
        populations = list(data.get("population") or [])
        with self._file_lock(experiment_id):
            for index, population in enumerate(populations):
                rows = self._rows_path(experiment_id, index)
                if population.get("from") is not None and population.get("rows") is not None:
                    if not rows.exists() or read_json(rows) != population["rows"]:
                        atomic_write_text(rows, json.dumps(population["rows"], separators=(",", ":")))
                    populations[index] = {key: value for key, value in population.items() if key != "rows"}
                else:
                    rows.unlink(missing_ok=True)
            shown = {**data, "population": populations} if "population" in data else data
            atomic_write_text(self._spec_path(experiment_id), json.dumps(shown, indent=2))

    def _spec_path(self, experiment_id: str) -> Path:
        return self._records_dir / f"{experiment_id}.spec.json"

    def _rows_path(self, experiment_id: str, index: int) -> Path:
        return self._records_dir / f"{experiment_id}.rows-{index}.json"

    def get(self, experiment_id: str, caller: Principal = LOCAL_ADMIN) -> ExperimentRecord:
        """The record with this id, if ``caller`` may see it.

        Raises:
            ExperimentNotFoundError: no such experiment, or one of another owner (the same answer,
                so ids do not leak).
        """
        record = self._records.get(experiment_id)
        if record is None or not caller.may_see(record.owner):
            raise ExperimentNotFoundError(experiment_id)
        return record

    def records(self, caller: Principal = LOCAL_ADMIN) -> list[ExperimentRecord]:
        """Every record ``caller`` may see, newest first."""
        with self._lock:  # the engine loop's thread writes records while the HTTP loop lists them
            every = list(self._records.values())
        visible = [record for record in every if caller.may_see(record.owner)]
        return sorted(visible, key=lambda record: (record.created_at, record.id), reverse=True)

    def update(self, experiment_id: str, **changes: Any) -> ExperimentRecord:
        """Change fields of a record and persist it.

        Args:
            experiment_id: the experiment.
            **changes: field values; validated like the record itself.

        Returns:
            The new record.

        Raises:
            ExperimentNotFoundError: no such experiment.
            pydantic.ValidationError: a value the record does not accept.
        """
        with self._lock:
            current = self.get(experiment_id)
            if all(name in ExperimentRecord.model_fields and getattr(current, name) == value
                   for name, value in changes.items()):
                return current  # nothing to write (a new record queued as it was created)
            record = ExperimentRecord.model_validate({**current.model_dump(), **changes})
            self._save(record)
        return record

    def delete(self, experiment_id: str, caller: Principal = LOCAL_ADMIN) -> None:
        """Remove a finished experiment: its record, then its run directory.

        Raises:
            ExperimentNotFoundError: no such experiment (or another owner's).
            ExperimentBusyError: it is queued or running.
            StorageError: the record or the run directory cannot be removed.
        """
        with self._lock:
            record = self.get(experiment_id, caller)
            if record.status in ACTIVE_STATUSES:
                raise ExperimentBusyError(experiment_id, record.status, "delete")
            try:
                with self._file_lock(experiment_id):
                    self._path(experiment_id).unlink(missing_ok=True)
                    for path in (self._spec_path(experiment_id), *self._records_dir.glob(f"{experiment_id}.rows-*.json")):
                        path.unlink(missing_ok=True)
            except OSError as error:
                raise StorageError(f"cannot remove the record of experiment {experiment_id}: {error}") from error
            del self._records[experiment_id]
            self._file_locks.pop(experiment_id, None)
            if record.idempotency is not None:
                self._by_key.pop((record.owner, record.idempotency.key), None)
        try:
            if isinstance(record.run_dir, str):
                run_store(record.run_dir).delete_prefix("")
            elif record.run_dir.exists():
                shutil.rmtree(record.run_dir)
        except (OSError, StorageError) as error:
            raise StorageError(f"experiment {experiment_id} is deleted but its run directory is not: {error}") from error

    def _path(self, experiment_id: str) -> Path:
        return self._records_dir / f"{experiment_id}.json"

    def _save(self, record: ExperimentRecord) -> None:
        with self._file_lock(record.id):
            atomic_write_text(self._path(record.id), record.model_dump_json(indent=2))
        self._index(record)

    def _index(self, record: ExperimentRecord) -> None:
        """Hold ``record`` in memory, index its key, and tell the watchers when its status is new; under the lock."""
        before = self._records.get(record.id)
        self._records[record.id] = record
        if record.idempotency is not None:
            self._by_key[(record.owner, record.idempotency.key)] = record.id
        if before is None or before.status != record.status:
            for watcher in self._watchers:
                watcher(record)

    def _load(self) -> None:
        # Temp files start with "." and do not end in .json, so a crash mid-write never shows up here.
        for path in sorted(self._records_dir.glob("*.json")):
            if "." in path.stem:  # <id>.spec.json, <id>.rows-N.json: a record's spec files
                continue
            try:
                data = read_json(path)
                if isinstance(data, dict) and "spec" in data:  # a record of an earlier version held its spec
                    self._write_spec(str(data.get("id")), data.pop("spec"))
                    atomic_write_text(path, json.dumps(data, indent=2, default=str))
                record = ExperimentRecord.model_validate(data)
            except (StorageError, ValidationError) as error:
                logger.warning("skipping unreadable experiment record %s: %s", path, error)
                continue
            adopted = _adopted(record)
            if adopted is not record:
                self._save(adopted)
            else:
                self._index(record)


def _adopted(record: ExperimentRecord) -> ExperimentRecord:
    """A loaded record as this process takes it over: what was mid-run is queued to resume."""
    was_running = record.status == RunStatus.RUNNING or (
        record.status == RunStatus.INTERRUPTED and record.resume_on_start
    )
    if record.cancel_requested and (was_running or record.status == RunStatus.QUEUED):
        return record.model_copy(update={
            "status": RunStatus.CANCELLED, "resume_on_start": False, "finished_at": record.finished_at or utc_now(),
            "error": "cancelled on request (the service stopped before the run had wound down)",
        })
    if was_running:
        return record.model_copy(update={
            "status": RunStatus.QUEUED, "error": None, "finished_at": None, "resume_on_start": False,
            "resumed_after_restart": record.resumed_after_restart + 1,
        })
    return record
