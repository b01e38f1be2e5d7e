"""The fan-out's bounded wait: StartWatch's rule without a cluster, and fan_out on the session LocalCluster."""

from __future__ import annotations

import asyncio
import time

import pytest

from engine.errors import TaskStallError
from engine.society.fanout import StartWatch, fan_out

# ---- StartWatch (sans-IO) -----------------------------------------------------------------------------


def test_keys_no_worker_takes_go_overdue_after_the_bound():
    watch = StartWatch(10, now=0)
    watch.observe(5, {"b-1": "no-worker"}, {"tcp://w1": [], "tcp://w2": []})
    assert not watch.overdue(9.9)
    assert watch.overdue(10)
    assert watch.cause() == ("no worker started task b-1 within 10 s: the scheduler holds it as 'no-worker', "
                             "so none of its 2 workers meets its restrictions or resources")


def test_a_key_processing_on_a_worker_is_progress_however_long_it_runs():
    watch = StartWatch(10, now=0)
    for now in range(5, 100, 5):
        watch.observe(now, {"b-1": "processing", "b-2": "queued"}, {"tcp://w1": ["b-1"]})
        assert not watch.overdue(now)


def test_a_result_arriving_is_progress():
    watch = StartWatch(10, now=0)
    watch.progressed(8)
    assert not watch.overdue(17) and watch.overdue(18)


def test_keys_queued_behind_other_work_wait_their_turn():
    watch = StartWatch(10, now=0)
    watch.observe(20, {"b-1": "queued"}, {"tcp://w1": ["someone-elses-task"]})
    assert not watch.overdue(20)


def test_keys_queued_on_idle_or_no_workers_are_overdue_with_the_cause():
    idle = StartWatch(10, now=0)
    idle.observe(20, {"b-1": "queued", "b-2": "queued"}, {"tcp://w1": []})
    assert idle.overdue(20)
    assert idle.cause() == ("no worker started any of the 2 tasks in flight (e.g. b-1) within 10 s: "
                            "their state on the scheduler is queued with 1 idle workers")
    gone = StartWatch(10, now=0)
    gone.observe(20, {"b-1": "queued"}, {})
    assert gone.overdue(20) and gone.cause().endswith("within 10 s: the cluster has 0 workers")


def test_keys_the_scheduler_does_not_know_are_named_so():
    watch = StartWatch(1, now=0)
    watch.observe(2, {"b-1": None}, {"tcp://w1": []})
    assert watch.overdue(2) and watch.cause().endswith("the scheduler does not know it (lost, or never received)")


# ---- fan_out on the LocalCluster ---------------------------------------------------------------------------


async def test_futures_no_worker_can_run_fail_within_the_bound(dask_client):
    started = time.perf_counter()
    with pytest.raises(TaskStallError) as caught:  # no worker can ever run it: an answer at all is the bound's
        await asyncio.wait_for(fan_out(dask_client, [1], lambda job: dask_client.submit(
            abs, job, key="batch-needs-gpu", pure=False, resources={"nonexistent": 1}), start_timeout_s=1.5), 120)
    assert time.perf_counter() - started >= 1.5  # not before its bound (soon after it: a speed goal, not behaviour)
    assert str(caught.value) == ("no worker started task batch-needs-gpu within 1.5 s: the scheduler holds it as "
                                 "'no-worker', so none of its 2 workers meets its restrictions or resources")


async def test_a_batch_running_longer_than_the_bound_is_fine(dask_client):
    # The bound is on starting, which a busy machine's cluster may take a while to do; the long job runs past it.
    jobs = [0.05, 6.0, 0.05]
    results = await fan_out(dask_client, jobs, lambda s: dask_client.submit(time.sleep, s, pure=False), limit=2, start_timeout_s=5)
    assert results == [None, None, None]


async def test_errors_still_come_after_the_jobs_in_flight(dask_client):
    seen: list[int] = []
    with pytest.raises(ZeroDivisionError):
        await fan_out(dask_client, [0, 1, 2], lambda j: dask_client.submit(divmod, 1, j, pure=False), limit=3,
                      on_result=lambda r: seen.append(r), start_timeout_s=5)
    assert sorted(seen) == [(0, 1), (1, 0)]
