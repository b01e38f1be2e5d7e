"""What each owner's runs take on disk: measured per run when it changes, summed per owner with no I/O.

The disk quota (``max_disk_bytes``) is checked on every submit, so the owner's use must not be a walk
of everything they ever ran. :class:`DiskLedger` keeps the bytes of each experiment's run as last
measured, and an owner's use is the sum of their experiments' entries:

- a run is measured when it ends (the first submit or refresh after it does), and while it runs by
  the service's periodic refresh (``POLIS_DISK_REFRESH_S``);
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
from pathlib import Path

from engine.storage.run_layout import is_url, run_store
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
    """The bytes of every experiment's run, as last measured; thread-safe.

    Args:
        registry: the experiments (their owners, statuses and run directories).
        measure: how one run is measured (:func:`run_bytes`; a test may count calls).
        reconcile_s: how old a finished run's measurement may grow before :meth:`refresh` repeats it.
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
        # experiment id -> (bytes, the record's status when measured, when measured)
        self._entries: dict[str, tuple[int, str, float]] = {}
        self._lock = threading.Lock()

    def used(self, owner: str) -> int:
        """``owner``'s bytes: the stored entries, after measuring only the runs that ended (or were never measured)
        since; a running run counts as last measured. I/O: the newly ended runs only, so call it off the event loop."""
        records = [record for record in self._registry.records() if record.owner == owner]
        for record in records:
            if record.status not in ACTIVE_STATUSES and self._changed(record):
                self._take(record)
        with self._lock:
            return sum(self._entries[record.id][0] for record in records if record.id in self._entries)

    def refresh(self) -> int:
        """Measure every run that is running, ended since its last measurement, or was last measured more than
        ``reconcile_s`` ago, and drop the entries of deleted experiments; return how many runs were measured.
        The service calls it every ``POLIS_DISK_REFRESH_S`` off the event loop."""
        records = self._registry.records()
        now = self._clock()
        measured = 0
        for record in records:
            entry = self._entries.get(record.id)
            if (record.status in ACTIVE_STATUSES or self._changed(record)
                    or (entry is not None and now - entry[2] >= self._reconcile_s)):
                self._take(record)
                measured += 1
        known = {record.id for record in records}
        with self._lock:
            for gone in set(self._entries) - known:
                del self._entries[gone]
        return measured

    def forget(self, experiment_id: str) -> None:
        """Drop a deleted experiment's entry."""
        with self._lock:
            self._entries.pop(experiment_id, None)

    def _changed(self, record: ExperimentRecord) -> bool:
        entry = self._entries.get(record.id)
        return entry is None or entry[1] != record.status

    def _take(self, record: ExperimentRecord) -> None:
        size = self._measure(record.run_dir)
        with self._lock:
            self._entries[record.id] = (size, str(record.status), self._clock())
