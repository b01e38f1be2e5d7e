"""Preflight: before a run's first tick, check that every worker can do its part.

A worker that runs another Polis (or none), cannot see the run directory, or cannot reach an LLM
endpoint would otherwise fail agent-steps one by one (counted as agent statuses) or hang the run.
:func:`preflight` probes every worker once and refuses with :class:`PreflightError`, naming the
workers and the causes.

The decision is sans-IO: :func:`find_problems` takes what the driver expects (:class:`Expectation`)
and what the workers answered (:class:`WorkerProbe`) and returns the problems. :func:`preflight` is
the Dask shell around it.

The probe that runs on the workers (:func:`probe_worker`) uses the standard library only and is
shipped by value (cloudpickle), so a worker without Polis installed still answers, with its import
error. Limitation: the source hash is of the files on disk; a long-lived worker that imported
modules before the checkout was edited still holds the old code.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import secrets
import socket
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import cloudpickle
import psutil
from distributed import Client

from engine.errors import PreflightError
from engine.llm.client import LLMClient
from engine.llm.local import is_local

__all__ = [
    "PREFLIGHT_DIR",
    "Endpoint",
    "Expectation",
    "PolisIdentity",
    "PreflightProblem",
    "PreflightReport",
    "WorkerProbe",
    "endpoints_of",
    "find_problems",
    "netns_identity",
    "polis_identity",
    "preflight",
    "probe_worker",
]

#: The folder inside the run directory that holds the token files workers read back.
PREFLIGHT_DIR = ".preflight"
#: Bytes of a token file a worker reads (the token itself is 32 hex digits).
_TOKEN_READ_LIMIT = 1024
_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


# ---- what runs on both sides (standard library only: shipped by value to the workers) -------------

def polis_identity() -> dict[str, Any]:
    """The Polis this process imports: ``{version, source_hash, path}``, or ``{error}`` if none.

    The hash covers every file of the ``engine`` package on disk (not ``__pycache__``), so an
    edited checkout differs from a clean one of the same version.
    """
    import hashlib
    import importlib
    import importlib.metadata
    import os

    try:
        engine = importlib.import_module("engine")
    except Exception as error:  # noqa: BLE001 - any import failure (ModuleNotFoundError, a broken install) is the answer
        return {"error": f"{type(error).__name__}: {error}"}
    if not getattr(engine, "__file__", None):  # a bare folder named engine somewhere on sys.path
        return {"error": f"'engine' is a namespace package ({', '.join(engine.__path__)}), not Polis"}
    root = os.path.dirname(os.path.abspath(engine.__file__))
    digest = hashlib.sha256()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        for name in sorted(filenames):
            if name.startswith(".") or name.endswith((".pyc", ".pyo")):
                continue
            path = os.path.join(dirpath, name)
            digest.update(os.path.relpath(path, root).replace(os.sep, "/").encode() + b"\0")
            with open(path, "rb") as handle:
                digest.update(handle.read())
            digest.update(b"\0")
    try:
        version: str | None = importlib.metadata.version("polis")
    except importlib.metadata.PackageNotFoundError:
        version = None  # a checkout on PYTHONPATH: the hash still identifies it
    return {"version": version, "source_hash": digest.hexdigest()[:16], "path": root}


def netns_identity() -> str | None:
    """This process's network namespace (boot id + namespace inode), or None off Linux.

    Two processes share ``127.0.0.1`` exactly when these match.
    """
    import os

    try:
        with open("/proc/sys/kernel/random/boot_id") as handle:
            boot = handle.read().strip()
        return f"{boot}:{os.readlink('/proc/self/ns/net')}"
    except OSError:
        return None


async def probe_worker(token_path: str, endpoints: list[list[Any]], io_timeout_s: float, connect_timeout_s: float) -> dict[str, Any]:
    """Run on a worker: its Polis, the token file's content, and a TCP connect to each endpoint.

    Blocking work runs in threads with a time limit, so a hung file system neither stalls the
    worker's event loop (its heartbeats) nor the probe's answer.

    Args:
        token_path: the file the driver wrote into the run directory.
        endpoints: ``[host, port]`` pairs to connect to.
        io_timeout_s: time allowed for reading the engine package and the token file.
        connect_timeout_s: time allowed for each TCP connect.

    Returns:
        A dict of plain values: ``polis``, ``token`` (``content`` or ``error``), ``endpoints``
        (``"host:port"`` -> None or the error), ``cwd``, ``hostname``, ``pid``, ``netns``.
    """
    import asyncio
    import os
    import socket

    def read_token() -> str:
        with open(token_path, encoding="utf-8", errors="replace") as handle:
            return handle.read(_TOKEN_READ_LIMIT)

    async def bounded(function: Any, what: str) -> tuple[Any, str | None]:
        try:
            return await asyncio.wait_for(asyncio.to_thread(function), io_timeout_s), None
        except TimeoutError:
            return None, f"{what} did not finish within {io_timeout_s:g} s"
        except OSError as error:
            return None, f"{type(error).__name__}: {error}"

    async def connect(host: str, port: int) -> str | None:
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), connect_timeout_s)
        except TimeoutError:
            return f"TCP connect timed out after {connect_timeout_s:g} s"
        except OSError as error:
            return f"{type(error).__name__}: {error}"
        writer.close()
        try:
            await writer.wait_closed()
        except OSError:
            pass  # the connect succeeded; how the socket closes does not matter
        return None

    (polis, polis_error), (content, token_error), *reached = await asyncio.gather(
        bounded(polis_identity, "reading the engine package"),
        bounded(read_token, "reading the token file"),
        *(connect(host, port) for host, port in endpoints),
    )
    return {
        "polis": polis if polis_error is None else {"error": polis_error},
        "token": {"content": content} if token_error is None else {"error": token_error},
        "endpoints": {f"{host}:{port}": error for (host, port), error in zip(endpoints, reached, strict=True)},
        "cwd": os.getcwd(),
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "netns": netns_identity(),
    }


# ---- the sans-IO decision ---------------------------------------------------------------------------

@dataclass(frozen=True)
class PolisIdentity:
    """Which Polis a process imports."""

    version: str | None  #: the installed distribution's version (None: a checkout on the path)
    source_hash: str  #: a hash of the engine package's files
    path: str  #: where the engine package lives

    @classmethod
    def of(cls, reply: Mapping[str, Any]) -> PolisIdentity:
        return cls(reply.get("version"), str(reply["source_hash"]), str(reply.get("path", "")))

    def __str__(self) -> str:
        return f"Polis {self.version or '(not installed)'} from {self.path} (source hash {self.source_hash})"


@dataclass(frozen=True)
class Endpoint:
    """An LLM server the workers must reach, with the roles that use it."""

    roles: tuple[str, ...]  #: the LLM roles that call it
    url: str  #: its base_url, or the ``local/<name>`` model before its server starts
    host: str | None  #: where to connect (None: nothing to connect to yet)
    port: int | None
    loopback: bool  #: only reachable from the driver's own network namespace
    problem: str | None = None  #: what is wrong with the URL itself

    @property
    def target(self) -> str:
        return f"{self.host}:{self.port}"

    def describe(self) -> str:
        roles = ", ".join(repr(r) for r in self.roles)
        return f"LLM role{'s' if len(self.roles) > 1 else ''} {roles} at {self.url}"


@dataclass(frozen=True)
class Expectation:
    """What the driver expects every worker to see."""

    identity: PolisIdentity  #: the driver's Polis
    token: str  #: the token file's content
    token_path: str  #: the token file, as the workers are given it
    endpoints: tuple[Endpoint, ...] = ()
    driver_addresses: frozenset[str] = frozenset()  #: the driver's IP addresses (loopback included)
    driver_netns: str | None = None  #: see :func:`netns_identity`


@dataclass(frozen=True)
class WorkerProbe:
    """One worker's answer to the probe (or why there is none)."""

    address: str  #: ``tcp://host:port`` as the scheduler knows it
    host: str  #: the worker's IP address
    polis: PolisIdentity | None = None
    polis_error: str | None = None  #: why Polis is not importable there
    token_content: str | None = None
    token_error: str | None = None  #: why the token file could not be read
    endpoint_errors: Mapping[str, str | None] = field(default_factory=dict)  #: ``host:port`` -> None or the error
    cwd: str = ""
    netns: str | None = None
    unanswered: str | None = None  #: why the probe gave no answer (timed out, failed, worker gone)

    @classmethod
    def from_reply(cls, address: str, host: str, reply: Mapping[str, Any]) -> WorkerProbe:
        """Read what :func:`probe_worker` returned."""
        polis, token = reply.get("polis") or {}, reply.get("token") or {}
        return cls(
            address=address,
            host=host,
            polis=PolisIdentity.of(polis) if "error" not in polis else None,
            polis_error=polis.get("error"),
            token_content=token.get("content"),
            token_error=token.get("error"),
            endpoint_errors=dict(reply.get("endpoints") or {}),
            cwd=str(reply.get("cwd", "")),
            netns=reply.get("netns"),
        )


@dataclass(frozen=True)
class PreflightProblem:
    """One reason to refuse the cluster."""

    worker: str | None  #: the worker's address (None: the cluster or the driver's settings)
    cause: str

    def __str__(self) -> str:
        return f"worker {self.worker}: {self.cause}" if self.worker else self.cause


@dataclass(frozen=True)
class PreflightReport:
    """A cluster that passed: what each worker answered."""

    identity: PolisIdentity  #: the Polis every worker runs
    workers: tuple[WorkerProbe, ...]
    endpoints: tuple[Endpoint, ...]
    seconds: float  #: how long the preflight took


def _is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES or host.lower().endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified  # connecting to 0.0.0.0 reaches this machine


def endpoints_of(llm_clients: Mapping[str, LLMClient]) -> tuple[Endpoint, ...]:
    """The LLM servers behind ``llm_clients`` (role -> client), one per distinct URL.

    ``sim/*`` clients without a base_url call no server. A ``local/<name>`` client is served on the
    driver's 127.0.0.1, before its server starts (no URL yet) and after (``base_url`` rewritten).
    """
    roles: dict[tuple[str, bool], list[str]] = {}
    for role, client in llm_clients.items():
        if is_local(client):
            roles.setdefault((client.model, True), []).append(role)
        elif client.base_url:
            roles.setdefault((client.base_url, False), []).append(role)
    endpoints = []
    for (url, local), names in roles.items():
        if local:
            endpoints.append(Endpoint(tuple(names), url, None, None, loopback=True))
            continue
        parts = urlsplit(url)
        try:
            port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
        except ValueError as error:
            endpoints.append(Endpoint(tuple(names), url, None, None, False, problem=f"its port is not a number ({error})"))
            continue
        if not parts.hostname or port is None:
            endpoints.append(Endpoint(tuple(names), url, None, None, False, problem="it names no host and port (http[s]://host[:port]/...)"))
            continue
        endpoints.append(Endpoint(tuple(names), url, parts.hostname, port, _is_loopback(parts.hostname)))
    return tuple(endpoints)


def _shares_loopback(expect: Expectation, probe: WorkerProbe) -> bool:
    if expect.driver_netns and probe.netns:
        return expect.driver_netns == probe.netns
    return probe.host in expect.driver_addresses or _is_loopback(probe.host)


def _token_problem(expect: Expectation, probe: WorkerProbe) -> str | None:
    where = f"{expect.token_path} (relative to its cwd {probe.cwd})" if not os.path.isabs(expect.token_path) else expect.token_path
    if probe.token_error is not None:
        return f"cannot read the run directory: reading the token file {where} failed: {probe.token_error}"
    if probe.token_content != expect.token:
        return (f"sees another run directory: the token file {where} holds {(probe.token_content or '')[:40]!r} "
                f"instead of the token the driver wrote")
    return None


def _endpoint_problem(expect: Expectation, probe: WorkerProbe, endpoint: Endpoint) -> str | None:
    if endpoint.loopback and not _shares_loopback(expect, probe):
        served = ("served on the driver's 127.0.0.1" if endpoint.host is None
                  else "on the driver's loopback interface")
        return (f"{endpoint.describe()} is {served}, and this worker (host {probe.host}) is not on the driver's "
                f"machine; serve the model where the workers can reach it and give its base_url")
    if endpoint.host is None:
        return None
    error = probe.endpoint_errors.get(endpoint.target, "not probed")
    if error is not None:
        return f"cannot reach {endpoint.describe()} ({endpoint.target}): {error}"
    return None


def _worker_causes(expect: Expectation, probe: WorkerProbe) -> list[str]:
    if probe.unanswered is not None:
        return [f"gave no answer to the preflight probe: {probe.unanswered}"]
    causes = []
    if probe.polis_error is not None:
        causes.append(f"polis not importable ({probe.polis_error})")
    elif probe.polis is not None and (probe.polis.version, probe.polis.source_hash) != (
            expect.identity.version, expect.identity.source_hash):
        causes.append(f"runs {probe.polis}, the driver runs {expect.identity}")
    causes.append(_token_problem(expect, probe))
    causes += [_endpoint_problem(expect, probe, e) for e in expect.endpoints if e.problem is None]
    return [c for c in causes if c is not None]


def find_problems(expect: Expectation, probes: Sequence[WorkerProbe]) -> list[PreflightProblem]:
    """Every reason to refuse the cluster, given the driver's expectation and the workers' answers.

    Args:
        expect: what the driver wrote and runs.
        probes: one per worker the scheduler knows.

    Returns:
        The problems, in worker order (empty: the cluster may run the run).
    """
    problems = [PreflightProblem(None, f"{e.describe()}: {e.problem}") for e in expect.endpoints if e.problem]
    if not probes:
        problems.append(PreflightProblem(None, "the cluster has no workers"))
    for probe in probes:
        problems += [PreflightProblem(probe.address, cause) for cause in _worker_causes(expect, probe)]
    return problems


# ---- the Dask shell -----------------------------------------------------------------------------------

_BY_VALUE_LOCK = threading.Lock()
_by_value_users = 0


@contextlib.contextmanager
def _shipped_by_value() -> Iterator[None]:
    """Pickle this module's functions by value for the block, so workers need no Polis to run the probe."""
    global _by_value_users
    module = sys.modules[__name__]
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


def _write_token(run_dir: Path) -> tuple[str, str]:
    """Write a fresh token atomically into ``run_dir/.preflight/``; return (token, its path)."""
    token = secrets.token_hex(16)
    folder = run_dir / PREFLIGHT_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / token
    partial = folder / f".{token}.partial"
    partial.write_text(token, encoding="utf-8")
    os.replace(partial, path)
    return token, str(path)


def _remove_token(path: str) -> None:
    Path(path).unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # not empty: another preflight's token is still there
        Path(path).parent.rmdir()


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
    while not (info := await client.scheduler.identity(n_workers=-1))["workers"]:
        if time.monotonic() > deadline:
            raise PreflightError(f"preflight refused the cluster: no worker joined the scheduler at "
                                 f"{client.scheduler.address} within {timeout_s:g} s")
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
    run_dir: Path | str,
    llm_clients: Mapping[str, LLMClient],
    *,
    timeout_s: float = 30.0,
    workers_timeout_s: float = 60.0,
    connect_timeout_s: float = 3.0,
) -> PreflightReport:
    """Check that every worker runs the driver's Polis, sees ``run_dir`` and reaches every LLM server.

    Call it after ``run_dir`` exists and before the env actor starts. It writes a token file under
    ``run_dir/.preflight/`` and removes it again.

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
    token, token_path = await asyncio.to_thread(_write_token, Path(run_dir))
    try:
        identity = await asyncio.to_thread(polis_identity)
        args = (token_path, targets, timeout_s / 2, connect_timeout_s)
        with _shipped_by_value():
            replies = await asyncio.gather(*(_probe(client, address, args, timeout_s) for address in workers))
    finally:
        await asyncio.to_thread(_remove_token, token_path)
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
