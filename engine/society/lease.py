"""The run lease: a heartbeat that proves a driver is alive, so a crashed run is never shown as running.

The driver rewrites ``LEASE.json`` (pid, host, expiry) every ``interval_s``; the lease is live while
its expiry is in the future and, on the same host, its process exists. A SIGKILLed driver stops
renewing: readers see ``crashed`` at once on its host (the pid is gone) and within ``ttl_s``
elsewhere. A second driver refuses a run directory whose lease is live.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import time
import uuid
from typing import Any

from engine.errors import RunLockedError, StaleRunError
from engine.run_status import RunStatus
from engine.society.status import read_society_step
from engine.storage.run_layout import LEASE_FILE, RunLocation, run_store

__all__ = ["RunLease", "check_session", "effective_status", "lease_is_live", "read_lease"]



def read_lease(run_dir: RunLocation) -> dict[str, Any] | None:
    """The run's lease, or None when no driver ever held it."""
    lease: dict[str, Any] | None = run_store(run_dir).get_json(LEASE_FILE, None)
    return lease


def check_session(run_dir: RunLocation, session: str | None) -> None:
    """Refuse to write for a driver session that no longer holds the run (a stale task on a remote
    worker outliving its cancelled run must not write into the run that resumed it).

    Raises:
        StaleRunError: another session holds the lease now.
    """
    if not session:
        return
    lease = read_lease(run_dir)
    if lease is not None and lease.get("session") not in (None, session):
        raise StaleRunError(f"driver session {session} no longer holds {run_dir} (now {lease.get('session')})")


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def lease_is_live(lease: dict[str, Any] | None, now: float | None = None) -> bool:
    if not lease or lease.get("released"):
        return False
    if float(lease.get("expires_at", 0)) <= (now if now is not None else time.time()):
        return False
    return lease.get("host") != socket.gethostname() or _pid_exists(int(lease.get("pid", -1)))


def effective_status(run_dir: RunLocation) -> RunStatus | None:
    """The run's status as a reader should report it: ``running`` only while the lease is live,
    ``crashed`` when the status file says running but no live driver holds the run."""
    status = read_society_step(run_dir)
    if status is None:
        return None
    if status.status == RunStatus.RUNNING and not lease_is_live(read_lease(run_dir)):
        return RunStatus.CRASHED
    return status.status


class RunLease:
    """Hold a run directory's lease for the life of a run (``async with``).

    Raises:
        RunLockedError: on entry, when another live driver holds the lease.
    """

    def __init__(self, run_dir: RunLocation, *, ttl_s: float = 10.0, interval_s: float = 2.0) -> None:
        self.store = run_store(run_dir)
        self.session = uuid.uuid4().hex  #: batch tasks carry it and refuse to write once it changed
        self.ttl_s = ttl_s
        self.interval_s = interval_s
        self._task: asyncio.Task[None] | None = None

    def _write(self, released: bool = False) -> None:
        now = time.time()
        self.store.set_json(LEASE_FILE, {
            "pid": os.getpid(), "host": socket.gethostname(), "session": self.session, "renewed_at": now,
            "expires_at": now + self.ttl_s, "released": released,
        })

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            await asyncio.to_thread(self._write)

    async def __aenter__(self) -> RunLease:
        current = self.store.get_json(LEASE_FILE, None)
        if lease_is_live(current) and not (current["pid"] == os.getpid() and current["host"] == socket.gethostname()):
            raise RunLockedError(
                f"{self.store.url} is being run by pid {current['pid']} on {current['host']} "
                f"(lease renewed {time.time() - current['renewed_at']:.0f} s ago); stop it first"
            )
        self._write()
        self._task = asyncio.create_task(self._renew())
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self._write(released=True)
