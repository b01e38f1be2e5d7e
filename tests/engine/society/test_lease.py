"""The run lease: a live driver holds the run; a dead one is reported as crashed, never running."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from datetime import datetime

import pytest

from engine.errors import RunLockedError, StaleRunError
from engine.society.lease import RunLease, check_session, effective_status, lease_is_live, read_lease
from engine.society.status import SocietyStep, write_society_step
from engine.storage.run_layout import RunLayout


def _running(run_dir) -> None:  # noqa: ANN001
    write_society_step(run_dir, SocietyStep(current_time=datetime(2026, 1, 1), status="running"))


async def test_the_lease_is_renewed_while_held_and_released_on_exit(tmp_path):
    _running(tmp_path)
    # A ttl far past any renewal's lateness on a busy machine; waiting for a renewal, not a fixed 0.35 s.
    async with RunLease(tmp_path, ttl_s=60.0, interval_s=0.1):
        first = read_lease(tmp_path)["renewed_at"]
        async with asyncio.timeout(60):  # only bounds a hang
            while read_lease(tmp_path)["renewed_at"] <= first:
                await asyncio.sleep(0.05)
        assert effective_status(tmp_path) == "running"
    assert read_lease(tmp_path)["released"] is True
    assert effective_status(tmp_path) == "crashed"  # still says running, but nobody holds it


async def test_a_second_driver_is_refused_while_the_first_lives(tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        lease = {"pid": holder.pid, "host": os.uname().nodename, "renewed_at": time.time(),
                 "expires_at": time.time() + 30, "released": False}
        RunLayout(tmp_path).lease_file.write_text(json.dumps(lease))
        with pytest.raises(RunLockedError, match=f"pid {holder.pid}"):
            async with RunLease(tmp_path):
                pass
    finally:
        holder.kill()
        holder.wait()
    # The holder died without releasing: the lease is dead at once on this host, expiry or not.
    assert not lease_is_live(read_lease(tmp_path))
    async with RunLease(tmp_path):
        pass


def test_an_expired_lease_is_dead_even_if_its_pid_exists(tmp_path):
    _running(tmp_path)
    lease = {"pid": os.getpid(), "host": os.uname().nodename, "renewed_at": 0, "expires_at": time.time() - 1, "released": False}
    RunLayout(tmp_path).lease_file.write_text(json.dumps(lease))
    assert effective_status(tmp_path) == "crashed"


async def test_a_task_of_an_older_session_may_not_write(tmp_path):
    async with RunLease(tmp_path) as old:
        check_session(tmp_path, old.session)  # the holder writes
    async with RunLease(tmp_path) as new:
        check_session(tmp_path, new.session)
        with pytest.raises(StaleRunError, match=old.session):
            check_session(tmp_path, old.session)
    check_session(tmp_path, None)  # jobs built outside a leased run are not checked
