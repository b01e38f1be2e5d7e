"""Shared fixtures: one real LocalCluster (worker processes) for the whole session."""

from __future__ import annotations

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
        cluster.close()


@pytest.fixture
async def dask_client(cluster_address):
    from distributed import Client

    client = await Client(cluster_address, asynchronous=True)
    try:
        yield client
    finally:
        await client.close()
