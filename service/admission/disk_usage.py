"""What each owner's runs take on disk: measured per run when it changes, summed per owner with no I/O.

The disk quota (``max_disk_bytes``) is checked on every submit, so the owner's use must not be a walk
of everything they ever ran. :class:`DiskLedger` keeps the bytes of each experiment's run as last
measured, and an owner's use is the sum of their experiments' entries:

- a run is measured when it ends (by the owner's next submit or the next refresh, whichever comes
  first), and while it runs by the service's periodic refresh (``POLIS_DISK_REFRESH_S``);
- every run is measured again every ``POLIS_DISK_RECONCILE_S``, which corrects any drift (a parent's
  deletion that leaves a fork the only holder of their shared files, a file changed by hand);
- a deleted experiment's entry goes with it.

A stored byte counts once: a local file hard-linked from several places (a fork shares its parent's
past; a template cache links its files into runs) counts ``size / links`` at each, so the shares add
up to its size. A run in object storage counts the bytes its store holds under it.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.api import is_url, run_store
from service.errors import ExperimentNotFoundError
from service.registry import ACTIVE_STATUSES, ExperimentRecord, ExperimentRegistry

__all__ = ["DiskLedger", "run_bytes"]


def run_bytes(run_dir: Path | str) -> int:
    """The bytes of one run directory (or URL), a file with ``n`` hard links counting ``size / n``; 0 when missing."""
    if is_url(run_dir):
        return run_store(run_dir).usage()
    total = 0.0
    pending = [os.fspath(run_dir)]
    while pending:
        try:
            entries = list(os.scandir(pending.pop()))
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(entry.path)
                else:
                    stat = entry.stat(follow_symlinks=False)
                    total += stat.st_size / max(stat.st_nlink, 1)
            except FileNotFoundError:  # removed while walking
                continue
    return round(total)


class DiskLedger:
    """The bytes of every experiment's run as last measured, and each owner's total; thread-safe.

    A submit asks :meth:`used`, which measures only the owner's runs that ended since it last looked (the
    registry tells the ledger of every status change) and otherwise adds nothing: no walk, no scan of the
    owner's experiments.

    Args:
        registry: the experiments (their owners, statuses and run directories); the ledger watches it.
        measure: how one run is measured (:func:`run_bytes`; a test may count calls).
        reconcile_s: how old a run's measurement may grow before :meth:`refresh` repeats it.
        clock: seconds, monotonic.
    """

    def __init__(
        self,
        registry: ExperimentRegistry,
        *,
        measure: Callable[[Path | str], int] = run_bytes,
        reconcile_s: float = 600.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._registry = registry
        self._measure = measure
        self._reconcile_s = reconcile_s
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[str, _Entry] = {}  # experiment id -> its last measurement
        self._totals: dict[str, int] = {}  # owner -> the sum of their entries
        self._stale: dict[str, set[str]] = {}  # owner -> experiments that ended since they were measured
        registry.watch(self._status_changed)
        for record in registry.records():  # what a restart finds: measured by the first submit or refresh
            self._status_changed(record)

    def used(self, owner: str) -> int:
        """``owner``'s bytes, after measuring the runs of theirs that ended since the last look (a running run counts
        as last refreshed). I/O: those runs only, so call it off the event loop."""
        with self._lock:
            ended = self._stale.pop(owner, set())
        for experiment_id in ended:
            try:
                self._take(self._registry.get(experiment_id))
            except ExperimentNotFoundError:  # deleted meanwhile
                continue
        with self._lock:
            return self._totals.get(owner, 0)

    def refresh(self) -> int:
        """Measure every run that is running, ended since it was measured, or was last measured ``reconcile_s`` ago,
        and drop the entries of deleted experiments; return how many runs were measured. The service calls it every
        ``POLIS_DISK_REFRESH_S`` off the event loop."""
        records = self._registry.records()
        now = self._clock()
        measured = 0
        for record in records:
            entry = self._entries.get(record.id)
            if (record.status in ACTIVE_STATUSES or entry is None or entry.status != record.status
                    or now - entry.when >= self._reconcile_s):
                self._take(record)
                measured += 1
        for gone in set(self._entries) - {record.id for record in records}:
            self.forget(gone)
        return measured

    def forget(self, experiment_id: str) -> None:
        """Drop a deleted experiment's entry."""
        with self._lock:
            entry = self._entries.pop(experiment_id, None)
            if entry is not None:
                self._totals[entry.owner] -= entry.size
                self._stale.get(entry.owner, set()).discard(experiment_id)

    def _status_changed(self, record: ExperimentRecord) -> None:
        if record.status not in ACTIVE_STATUSES:
            with self._lock:
                self._stale.setdefault(record.owner, set()).add(record.id)

    def _take(self, record: ExperimentRecord) -> None:
        size = self._measure(record.run_dir)
        with self._lock:
            before = self._entries.get(record.id)
            self._entries[record.id] = _Entry(record.owner, size, str(record.status), self._clock())
            self._totals[record.owner] = self._totals.get(record.owner, 0) + size - (before.size if before else 0)
            if record.status not in ACTIVE_STATUSES:
                self._stale.get(record.owner, set()).discard(record.id)


@dataclass(frozen=True)
class _Entry:
    owner: str
    size: int
    status: str  #: the record's status when measured
    when: float  #: when measured (``clock``)
