"""A tier batch's worker dies after its members acted and before its shards were written: Dask runs the batch again
on the other worker, which first drops what the lost attempt queued in the env, so each member acts once a tick."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path

from engine.failpoints import arm
from engine.society.run.dashboard import ENV_ROUTER, key_kind
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader

MEMBERS, TICKS, DIES_AT = 200, 5, 4
SPEC = {
    "name": "tier-death", "seed": 2, "batch_size": 50, "max_workers": 2,
    "population": [{"count": MEMBERS, "tier": "rule", "rule": {"policy": "bounded_confidence", "params": {"post_probability": 1}}}],
    "environment": {"modules": [{"type": "SocialMediaSpace"}]},
    "steps": [{"type": "run", "num_steps": TICKS, "tick": 3600}],
}


async def _actor_worker(client, timeout_s: float = 120.0) -> str:  # noqa: ANN001
    """The address of the worker that holds the run's env actor, once it has one."""
    deadline = time.monotonic() + timeout_s
    while True:
        who = await client.who_has()
        found = [addrs[0] for key, addrs in who.items() if key_kind(key) == ENV_ROUTER and addrs]
        if found:
            return found[0]
        assert time.monotonic() < deadline, "the run started no env actor"
        await asyncio.sleep(0.02)


async def test_a_retried_tier_batch_acts_once_per_member_per_tick(dask_client, tmp_path: Path) -> None:
    task = asyncio.get_running_loop().create_task(run_experiment(parse_spec(SPEC), tmp_path / "run", dask_client))
    try:
        actor = await _actor_worker(dask_client)
        victim = next(a for a in await dask_client.run(os.getpid) if a != actor)
        await dask_client.run(arm, f"mid_tier_batch:step={DIES_AT}:kill=self", workers=[victim])
        summary = await task
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        await dask_client.run(arm, "")
    assert summary.status == "completed", summary.error
    assert summary.ticks_done == TICKS
    with ReplayReader(tmp_path / "run") as reader:
        posts = reader.query("SELECT agent_id, step, count(*) AS n FROM social_actions WHERE kind = 'post' GROUP BY ALL").to_pylist()
        rows = reader.query("SELECT step, count(*) AS n FROM actions GROUP BY step ORDER BY step").to_pylist()
    assert [r["n"] for r in rows] == [MEMBERS] * TICKS
    assert len(posts) == MEMBERS * TICKS and {p["n"] for p in posts} == {1}  # nothing of the lost attempt was applied
    deadline = time.monotonic() + 120
    while len(await dask_client.run(os.getpid)) < 2:  # the nanny restarts the killed worker for the next tests
        assert time.monotonic() < deadline, "the killed worker did not come back"
        await asyncio.sleep(0.2)
    assert victim not in await dask_client.run(os.getpid)  # it died at the failpoint (a new worker took its place)
