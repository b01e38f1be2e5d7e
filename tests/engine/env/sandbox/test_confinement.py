"""The sandbox process confines itself before it reads code: its own network namespace, no root, an empty read-only cwd."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.env.sandbox import SandboxLimits, SandboxPool, execute


@pytest.fixture
async def pool():
    pool = SandboxPool(1, limits=SandboxLimits())
    await pool.start()
    try:
        yield pool
    finally:
        pool.terminate()


def _status(pid: int, field: str) -> list[str]:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return line.split()[1:]
    raise AssertionError(f"no {field} in /proc/{pid}/status")


async def test_the_sandbox_process_has_its_own_network_no_root_and_an_empty_read_only_cwd(pool: SandboxPool) -> None:
    [pid] = pool.pids()
    [process] = [p for p in pool._processes if p.pid == pid]
    confined = process.confined
    cwd = Path(os.readlink(f"/proc/{pid}/cwd"))
    assert confined["cwd"] == str(cwd) and list(cwd.iterdir()) == [] and cwd.stat().st_mode & 0o777 == 0o555
    if os.geteuid() == 0:  # CI runs as root: the child must not
        assert _status(pid, "Uid") == ["65534"] * 4 and _status(pid, "Gid") == ["65534"] * 4
        assert _status(pid, "Groups") == []
        assert confined["netns"] is True  # root may always make one
    if confined["netns"]:
        assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
    else:
        assert confined["netns_error"]  # the fallback says why (and the pool logged a warning)

    result = await execute("results['x'] = sum(range(10))", {}, executor=pool)
    assert result.ok and result.results == {"x": 45}  # confined, it still runs code
