"""Preflight and the fan-out's bounded wait on a real external cluster (``dask scheduler`` + ``dask worker``)."""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
import subprocess
import time
from collections.abc import Iterator

import pytest
from distributed import Client

from engine.errors import PreflightError, TaskStallError
from engine.llm.client import LLMClient
from engine.llm.sim import SimLLM
from engine.llm.sim.background import serving
from engine.society.fanout import fan_out
from engine.society.run.cluster import driver_host
from engine.society.run.preflight import preflight
from tests.engine.society import external_cluster as cluster_fixtures
from tests.engine.society.external_cluster import ExternalCluster, bare_python

external_cluster = cluster_fixtures.external_cluster  # the shared module-scoped fixture, for pytest to find


@pytest.fixture
async def client(external_cluster: ExternalCluster):
    async with Client(external_cluster.address, asynchronous=True) as client:
        yield client


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with serving(SimLLM(name="x", seed=1)) as url:
        yield url


def _clients(url: str) -> dict[str, LLMClient]:
    return {"agent": LLMClient(model="openai/sim", base_url=f"{url}/v1"), "coder": LLMClient(model="openai/sim", base_url=f"{url}/v1")}


async def _workers(client: Client) -> set[str]:
    return set((await client.scheduler.identity(n_workers=-1))["workers"])


async def test_the_cluster_is_external_and_started_elsewhere(external_cluster, client):
    cwds = await client.run(os.getcwd)
    assert len(cwds) == 2 and set(cwds.values()) == {str(external_cluster.root)}
    # (That it starts within 30 s, external_cluster.startup_s, is a speed goal, not behaviour: benchmarks/.)


async def test_the_driver_host_is_the_local_end_of_the_scheduler_connection(client, dask_client):
    # Both clusters listen on loopback here; tests/deploy/test_multihost.py checks another host's address.
    assert driver_host(client) == driver_host(dask_client) == "127.0.0.1"


async def test_preflight_passes_on_an_external_cluster_with_a_reachable_server(external_cluster, client, sim_url, tmp_path):
    report = await preflight(client, tmp_path / "runs" / "r1", _clients(sim_url), timeout_s=20)
    assert {w.address for w in report.workers} == {w.address for w in external_cluster.workers.values()}
    assert all(w.token_error is None and w.polis == report.identity for w in report.workers)
    assert report.seconds < 10


def _can_unshare() -> str | None:
    if os.geteuid() != 0:
        return "unshare --mount needs root"
    try:
        probe = subprocess.run(["unshare", "--mount", "sh", "-c", "mount -t tmpfs tmpfs /mnt"], capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unshare failed: {error}"
    return None if probe.returncode == 0 else f"unshare failed: {probe.stderr.decode(errors='replace').strip()}"


async def test_a_worker_that_cannot_see_the_runs_folder_is_refused(external_cluster, client, sim_url, tmp_path):
    if (reason := _can_unshare()) is not None:
        pytest.skip(reason)
    runs = tmp_path / "runs"
    (runs / "r1").mkdir(parents=True)
    blind = external_cluster.start_worker(
        "blind", prefix=["unshare", "--mount", "sh", "-c", f'mount -t tmpfs tmpfs {shlex.quote(str(runs))} && exec "$@"', "sh"])
    try:
        with pytest.raises(PreflightError) as caught:
            await preflight(client, runs / "r1", _clients(sim_url), timeout_s=20)
    finally:
        external_cluster.kill_worker(blind)
    message = str(caught.value)
    assert caught.value.workers == (blind.address,), message
    assert f"worker {blind.address}: cannot read the run directory: reading the token file {runs / 'r1' / '.preflight'}/" in message
    assert "FileNotFoundError" in message and message.count("\n") == 1


async def test_a_worker_without_polis_is_refused(external_cluster, client, sim_url, tmp_path, monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)  # a checkout on PYTHONPATH would make Polis importable anyway
    python = bare_python(tmp_path)
    check = subprocess.run([python, "-c", "import distributed, engine"], capture_output=True, text=True, cwd=tmp_path)
    assert "No module named 'engine'" in check.stderr, check.stderr
    bare = external_cluster.start_worker("bare", python=python)
    try:
        with pytest.raises(PreflightError) as caught:
            await preflight(client, tmp_path / "r1", _clients(sim_url), timeout_s=20)
    finally:
        external_cluster.kill_worker(bare)
    assert str(caught.value).endswith(
        f"worker {bare.address}: polis not importable (ModuleNotFoundError: No module named 'engine')"), str(caught.value)
    assert caught.value.workers == (bare.address,)


async def test_a_worker_that_does_not_answer_is_named(external_cluster, client, tmp_path):
    stuck = external_cluster.start_worker("stuck")
    try:
        os.kill(stuck.process.pid, signal.SIGSTOP)  # registered, then silent
        with pytest.raises(PreflightError) as caught:  # the outer bound turns a preflight that waits forever into a failure
            await asyncio.wait_for(preflight(client, tmp_path / "r1", {}, timeout_s=2), 120)
    finally:
        external_cluster.kill_worker(stuck)
    assert caught.value.workers == (stuck.address,)
    assert f"worker {stuck.address}: gave no answer to the preflight probe: no answer within 2 s" in str(caught.value)


# ---- a cluster whose workers are all gone ----------------------------------------------------------------

@pytest.fixture(scope="module")
def emptied_cluster(tmp_path_factory) -> Iterator[ExternalCluster]:
    with ExternalCluster(tmp_path_factory.mktemp("emptied-cluster"), n_workers=1) as cluster:
        cluster.kill_worker(next(iter(cluster.workers.values())))
        yield cluster


@pytest.fixture
async def empty_client(emptied_cluster):
    async with Client(emptied_cluster.address, asynchronous=True) as client:
        deadline = time.monotonic() + 120  # only bounds a hang
        while await _workers(client):
            assert time.monotonic() < deadline, "the scheduler still lists the killed worker"
            await asyncio.sleep(0.1)
        yield client


async def test_preflight_refuses_a_cluster_without_workers_in_bounded_time(emptied_cluster, empty_client, tmp_path):
    # Bounded by its 1 s: no worker ever joins, so an answer at all is the bound's (the outer one only turns waiting
    # forever into a failure; answering within a few seconds is a speed goal, not behaviour).
    with pytest.raises(PreflightError, match=f"no worker joined the scheduler at {emptied_cluster.address} within 1 s"):
        await asyncio.wait_for(preflight(empty_client, tmp_path, {}, workers_timeout_s=1), 120)


async def test_fan_out_fails_when_the_cluster_lost_all_its_workers(empty_client):
    started = time.perf_counter()
    with pytest.raises(TaskStallError) as caught:  # no worker ever comes: an answer at all is the bound's
        await asyncio.wait_for(fan_out(empty_client, [1, 2], lambda job: empty_client.submit(
            abs, -job, key=f"batch-gone-{job}", pure=False), start_timeout_s=2), 120)
    assert time.perf_counter() - started >= 2  # not before its bound
    assert str(caught.value) == "no worker started any of the 2 tasks in flight (e.g. batch-gone-1) within 2 s: the cluster has 0 workers"
    deadline = time.monotonic() + 120  # cancelled: nothing of the attempt is left behind (the cancel travels batched)
    while set((await empty_client.scheduler.get_task_status(keys=["batch-gone-1", "batch-gone-2"])).values()) != {None}:
        assert time.monotonic() < deadline, "the stalled tasks were not cancelled"
        await asyncio.sleep(0.05)
