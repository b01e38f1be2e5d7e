"""The Dask shell: write the token, probe every worker (bounded), decide, refuse or report."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import secrets
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import cloudpickle
import psutil
from distributed import Client

from engine.errors import PreflightError
from engine.llm.client import LLMClient
from engine.society.run.preflight import probe as probe_module
from engine.society.run.preflight.decision import (
    Expectation,
    PolisIdentity,
    PreflightReport,
    WorkerProbe,
    endpoints_of,
    find_problems,
)
from engine.society.run.preflight.probe import netns_identity, polis_identity, probe_worker
from engine.storage.run_layout import RunLocation, run_child, run_store

__all__ = ["PREFLIGHT_DIR", "preflight"]

#: The folder inside the run directory that holds the token files workers read back.
PREFLIGHT_DIR = ".preflight"


_BY_VALUE_LOCK = threading.Lock()
_by_value_users = 0


@contextlib.contextmanager
def _shipped_by_value() -> Iterator[None]:
    """Pickle the probe module by value for the block, so workers need no Polis to run the probe."""
    global _by_value_users
    module = probe_module
    with _BY_VALUE_LOCK:
        if _by_value_users == 0:
            cloudpickle.register_pickle_by_value(module)
        _by_value_users += 1
    try:
        yield
    finally:
        with _BY_VALUE_LOCK:
            _by_value_users -= 1
            if _by_value_users == 0:
                cloudpickle.unregister_pickle_by_value(module)


def _driver_addresses() -> frozenset[str]:
    addresses = {"127.0.0.1", "::1"}
    for entries in psutil.net_if_addrs().values():
        addresses.update(e.address.split("%")[0] for e in entries if e.family in (socket.AF_INET, socket.AF_INET6))
    return frozenset(addresses)


def _write_token(run_dir: RunLocation) -> tuple[str, str]:
    """Write a fresh token as the run's key ``.preflight/<token>``; return (token, where workers find it: a path or URL)."""
    token = secrets.token_hex(16)
    run_store(run_dir).set(f"{PREFLIGHT_DIR}/{token}", token.encode())
    return token, str(run_child(run_child(run_dir, PREFLIGHT_DIR), token))


def _remove_token(run_dir: RunLocation, token: str) -> None:
    run_store(run_dir).delete(f"{PREFLIGHT_DIR}/{token}")  # the store drops the emptied folder (on disk)


def _worker_ip(address: str, host: str | None) -> str:
    host = host or urlsplit(address).hostname or ""
    try:
        ipaddress.ip_address(host)
    except ValueError:
        try:
            return socket.gethostbyname(host)
        except OSError:
            return host
    return host


async def _first_workers(client: Client, timeout_s: float) -> dict[str, Any]:
    """The scheduler's identity once a worker has joined (polling, like ``Client.wait_for_workers``)."""
    deadline = time.monotonic() + timeout_s
    scheduler = client.scheduler
    assert scheduler is not None  # a started client has its scheduler rpc
    while not (info := await scheduler.identity(n_workers=-1))["workers"]:
        if time.monotonic() > deadline:
            raise PreflightError(f"preflight refused the cluster: no worker joined the scheduler at "
                                 f"{scheduler.address} within {timeout_s:g} s")
        await asyncio.sleep(0.1)
    return info


async def _probe(client: Client, address: str, args: tuple[Any, ...], timeout_s: float) -> tuple[Mapping[str, Any] | None, str | None]:
    """One worker's reply, or why there is none."""
    try:
        replies = await asyncio.wait_for(client.run(probe_worker, *args, workers=[address], on_error="return"), timeout_s)
    except TimeoutError:
        return None, f"no answer within {timeout_s:g} s (a blocked or broken worker)"
    reply = replies.get(address)
    if reply is None:
        return None, "it left the cluster during the probe"
    if isinstance(reply, ModuleNotFoundError) and (reply.name or "").split(".")[0] == "engine":
        return {"polis": {"error": f"{type(reply).__name__}: {reply}"}}, None
    if isinstance(reply, BaseException):
        return None, f"the probe failed there: {type(reply).__name__}: {reply}"
    return reply, None


async def preflight(
    client: Client,
    run_dir: RunLocation,
    llm_clients: Mapping[str, LLMClient],
    *,
    timeout_s: float = 30.0,
    workers_timeout_s: float = 60.0,
    connect_timeout_s: float = 3.0,
) -> PreflightReport:
    """Check that every worker runs the driver's Polis, sees ``run_dir`` and reaches every LLM server.

    Call it after ``run_dir`` exists and before the env actor starts. It writes a token under
    ``run_dir/.preflight/`` and removes it again. A run in object storage (``s3://...``) is read through
    the worker's own store, so a worker without the credentials, the endpoint or the bucket is named.

    Args:
        client: the asynchronous Client of the run.
        run_dir: the run directory, exactly as the workers will be given it.
        llm_clients: the run's LLM clients by role (``local/*`` ones before or after their server starts).
        timeout_s: how long the probes may take; a worker that has not answered by then is named.
        workers_timeout_s: how long to wait for the first worker to join.
        connect_timeout_s: each worker's time limit for one TCP connect to an LLM server.

    Returns:
        What every worker answered.

    Raises:
        PreflightError: no worker joined, or a worker cannot do its part; the message names every
            worker and cause, ``workers`` lists their addresses.
    """
    started = time.perf_counter()
    info = await _first_workers(client, workers_timeout_s)
    workers = {address: _worker_ip(address, worker.get("host")) for address, worker in info["workers"].items()}
    endpoints = endpoints_of(llm_clients)
    targets = [[e.host, e.port] for e in endpoints if e.host is not None and e.problem is None]
    token, token_path = await asyncio.to_thread(_write_token, run_dir)
    try:
        identity = await asyncio.to_thread(polis_identity)
        args = (token_path, targets, timeout_s / 2, connect_timeout_s)
        with _shipped_by_value():
            replies = await asyncio.gather(*(_probe(client, address, args, timeout_s) for address in workers))
    finally:
        await asyncio.to_thread(_remove_token, run_dir, token)
    probes = tuple(
        WorkerProbe(address, host, unanswered=why) if reply is None else WorkerProbe.from_reply(address, host, reply)
        for (address, host), (reply, why) in zip(workers.items(), replies, strict=True)
    )
    expect = Expectation(
        identity=PolisIdentity.of(identity), token=token, token_path=token_path, endpoints=endpoints,
        driver_addresses=_driver_addresses(), driver_netns=netns_identity(),
    )
    problems = find_problems(expect, probes)
    if problems:
        lines = "\n".join(f"  {p}" for p in problems)
        named = tuple(dict.fromkeys(p.worker for p in problems if p.worker))
        raise PreflightError(f"preflight refused the cluster ({len(problems)} problem{'s' if len(problems) > 1 else ''}):\n{lines}",
                             workers=named)
    return PreflightReport(expect.identity, probes, endpoints, time.perf_counter() - started)
