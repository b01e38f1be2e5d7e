"""The sans-IO decision: what the driver expects, what the workers answered, and the problems."""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from engine.llm.client import LLMClient
from engine.llm.local import is_local

__all__ = [
    "Endpoint",
    "Expectation",
    "PolisIdentity",
    "PreflightProblem",
    "PreflightReport",
    "WorkerProbe",
    "endpoints_of",
    "find_problems",
]

_LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})


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

    ``sim/*`` clients without a base_url call no server. A ``local/<name>`` client before its server
    starts has no URL yet and counts as the driver's loopback; once started (``base_url`` rewritten to
    the driver's address toward the scheduler) it is an endpoint like any other, connected to from
    every worker.
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
    if "://" in expect.token_path:  # a run in object storage, read through the worker's store
        if probe.token_error is not None:
            run = expect.token_path.rpartition("/.preflight/")[0]
            return f"cannot reach the run's store {run}: reading its preflight token failed: {probe.token_error}"
        where = expect.token_path
    else:
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
    causes: list[str | None] = []
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
