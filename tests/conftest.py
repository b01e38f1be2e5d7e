"""Shared fixtures: one real LocalCluster (worker processes) for the whole session; and the test tiers."""

from __future__ import annotations

import multiprocessing.process
import re
import socket
import subprocess

import dask
import pytest
from distributed import LocalCluster

from engine.settings import THREADS_PER_WORKER
from engine.society.run.cluster import CLUSTER_CONFIG


@pytest.fixture(scope="session")
def cluster_address():
    """A LocalCluster of 2 worker processes x ``THREADS_PER_WORKER`` threads, as on the default embedded setup."""
    with dask.config.set(CLUSTER_CONFIG):
        cluster = LocalCluster(
            n_workers=2, threads_per_worker=THREADS_PER_WORKER, processes=True, host="127.0.0.1", dashboard_address="127.0.0.1:0"
        )
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close(timeout=60)  # bounded: a wedged worker process must not hold the session's end


@pytest.fixture
async def dask_client(cluster_address):
    from distributed import Client

    client = await Client(cluster_address, asynchronous=True)
    try:
        yield client
    finally:
        await client.close()


# ---- test tiers --------------------------------------------------------------------------------------------
# `make check` runs the unit tier (`pytest -m unit`): no cluster, no process, no network. A test is in it when
# neither its fixtures nor its module's source reach any of those; inside it, starting a process or opening
# a TCP connection fails the test (so a test that slips past the static reading is caught, not slow).
_HEAVY_FIXTURES = {"cluster_address", "dask_client", "external_cluster", "env_actor_worker", "moto_server", "s3_endpoint",
                   "reads_data_files"}
_HEAVY_SOURCE = re.compile(
    r"\bsubprocess\b|\bserve\(|\bLocalCluster\b|\bopen_client\b|\bSandboxPool\b|\bmoto\b|\bsim_llm_process\b"
    r"|\bpolis\.(?:run|submit|arun|Session|connect)\b|\buvicorn\b|\bchromium\b|\bBrowser\b|HTTPServer|\brun_experiment\b"
    r"|\brun_spec\b|\bClient\(|\bmultiprocessing\b|\bSimLLMServer\b|\bstart_sim_llm\b|\bexecute\(|\bnbclient\b"
    r"|[Cc]ode[Gg]en|\bsandbox\b|\blocal_model|\blitellm\b|\baiohttp\b|127\.0\.0\.1|localhost|\bEnvHost\b|\bEnvRouterActor\b|\bpreflight\b"
)
_SOURCE_IS_HEAVY: dict[str, bool] = {}


def _heavy(item: pytest.Item) -> bool:
    if _HEAVY_FIXTURES & set(getattr(item, "fixturenames", ())):
        return True
    path = str(item.path)
    if path not in _SOURCE_IS_HEAVY:
        _SOURCE_IS_HEAVY[path] = bool(_HEAVY_SOURCE.search(item.path.read_text(encoding="utf-8")))
    return _SOURCE_IS_HEAVY[path]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if not _heavy(item):
            item.add_marker(pytest.mark.unit)


@pytest.fixture(autouse=True)
def _unit_tier_stays_in_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    if request.node.get_closest_marker("unit") is None:
        return

    def no_process(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a unit-tier test started a process: move it out of the unit tier (tests/conftest.py)")

    real_connect = socket.socket.connect

    def no_network(self: socket.socket, address: object) -> None:
        if self.family in (socket.AF_INET, socket.AF_INET6):
            raise RuntimeError("a unit-tier test opened a TCP connection: move it out of the unit tier (tests/conftest.py)")
        real_connect(self, address)

    monkeypatch.setattr(subprocess.Popen, "__init__", no_process)
    monkeypatch.setattr(multiprocessing.process.BaseProcess, "start", no_process)
    monkeypatch.setattr(socket.socket, "connect", no_network)


@pytest.fixture
def reads_data_files() -> None:
    """Marks a test that reads a spec's data files (tables, surveys, edge files): each is parsed in a child process
    (``engine.population.bounded_read``), so the test is not in the unit tier. A module takes it with
    ``pytestmark = pytest.mark.usefixtures("reads_data_files")``."""


@pytest.fixture
def shell():
    """The in-process shell: a run's batches and env router in this process (no cluster)."""
    from engine.society.shells import InProcessShell

    return InProcessShell()
