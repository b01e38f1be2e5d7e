"""Connecting to Dask: a LocalCluster of worker processes by default, or a remote scheduler."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import dask
from distributed import Client, LocalCluster
from distributed.comm import get_address_host
from distributed.security import Security
from distributed.utils import silence_logging_cmgr

from engine.cluster_options import THREADS_PER_WORKER

__all__ = ["CLUSTER_CONFIG", "driver_host", "open_client"]

#: Dask settings for clusters Polis starts. A call to an actor whose worker died retries its
#: connection until this timeout (30 s by default) before the society can replace the actor.
CLUSTER_CONFIG = {"distributed.comm.timeouts.connect": "10s"}


def driver_host(client: Client) -> str:
    """The driver's IP address on its connection to the scheduler: the address the workers can reach it by.

    It is the local end of the client's scheduler connection, so it is 127.0.0.1 for a LocalCluster
    (which listens on loopback) and the interface that routes to the scheduler for an external
    cluster. A connection without an IP address (``inproc://``) gives 127.0.0.1.
    """
    comm = getattr(client.scheduler_comm, "comm", None)
    local = getattr(comm, "local_address", None)
    if not isinstance(local, str) or not local.startswith(("tcp://", "tls://")):
        return "127.0.0.1"
    return str(get_address_host(local))


@asynccontextmanager
async def open_client(
    scheduler: str | None = None,
    *,
    n_workers: int | None = None,
    threads_per_worker: int = THREADS_PER_WORKER,
    dashboard_address: str = "127.0.0.1:8787",
    security: Security | None = None,
) -> AsyncIterator[Client]:
    """Yield an asynchronous Client.

    Args:
        scheduler: a scheduler address (``tcp://host:8786``); None starts a LocalCluster.
        n_workers: LocalCluster worker processes (default: one per core).
        threads_per_worker: task slots in each LocalCluster worker process.
        dashboard_address: where the LocalCluster's dashboard listens (a random port if taken).
        security: mutual TLS (``EngineSettings.security``): the client's certificate for a ``tls://`` scheduler, and a
            LocalCluster's for all its processes; None = Dask's configuration (plain TCP by default).
    """
    if scheduler:
        client = await Client(scheduler, security=security, asynchronous=True)
        try:
            yield client
        finally:
            await client.close()
        return
    with dask.config.set(CLUSTER_CONFIG):  # the nannies hand this config to their workers
        cluster = await LocalCluster(
            n_workers=n_workers or os.cpu_count() or 1,
            threads_per_worker=threads_per_worker,
            processes=True,
            host="127.0.0.1",
            dashboard_address=dashboard_address,
            asynchronous=True,
            **({"security": security, "protocol": "tls://"} if security is not None else {}),
        )
    client = await Client(cluster, security=security, asynchronous=True)
    try:
        yield client
    finally:
        # Dask logs the workers' goodbyes at INFO ("Received 'close-stream' ..."); they would land
        # after the CLI's last progress line.
        with silence_logging_cmgr(logging.WARNING):
            await client.close()
            closing = cluster.close()
            assert closing is not None  # an asynchronous cluster's close() is awaitable
            await closing
