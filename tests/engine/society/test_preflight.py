"""Preflight's decision (sans-IO, no cluster) and its probe run in-process; on a LocalCluster, in
``tests/engine/society/shells/test_on_dask.py``."""

from __future__ import annotations

import os
import socket

import pytest

from engine.llm.client import LLMClient
from engine.society.run.preflight import (
    Endpoint,
    Expectation,
    PolisIdentity,
    WorkerProbe,
    endpoints_of,
    find_problems,
    polis_identity,
    probe_worker,
)

IDENTITY = PolisIdentity("0.1.0", "0123456789abcdef", "/srv/polis/engine")
TOKEN = "5f0c" * 8
TOKEN_PATH = f"/runs/r1/.preflight/{TOKEN}"
DRIVER_NETNS = "boot-1:net:[4026531840]"
SIM = LLMClient(role="agent", model="openai/sim", base_url="http://10.0.0.9:8000/v1")


def expect(clients: dict[str, LLMClient] | None = None, **fields) -> Expectation:
    values = {
        "identity": IDENTITY, "token": TOKEN, "token_path": TOKEN_PATH,
        "endpoints": endpoints_of(clients if clients is not None else {"agent": SIM}),
        "driver_addresses": frozenset({"127.0.0.1", "::1", "10.0.0.1"}), "driver_netns": DRIVER_NETNS,
    }
    return Expectation(**{**values, **fields})


def probe(address: str = "tcp://10.0.0.1:40001", **fields) -> WorkerProbe:
    """A healthy worker on the driver's host (same network namespace) unless ``fields`` say otherwise."""
    host = address.removeprefix("tcp://").rsplit(":", 1)[0]
    values = {
        "polis": IDENTITY, "token_content": TOKEN, "endpoint_errors": {"10.0.0.9:8000": None},
        "cwd": "/home/worker", "netns": DRIVER_NETNS,
    }
    return WorkerProbe(address, host, **{**values, **fields})


def remote(address: str = "tcp://10.0.0.2:40001", **fields) -> WorkerProbe:
    return probe(address, netns="boot-2:net:[4026531840]", **fields)


def causes(expectation: Expectation, *probes: WorkerProbe) -> list[str]:
    return [str(p) for p in find_problems(expectation, probes)]


# ---- the decision ------------------------------------------------------------------------------------

def test_a_healthy_cluster_has_no_problems():
    assert causes(expect(), probe(), remote()) == []


def test_no_workers_is_refused():
    assert causes(expect()) == ["the cluster has no workers"]


def test_a_worker_without_polis_is_named_with_its_import_error():
    reply = {"polis": {"error": "ModuleNotFoundError: No module named 'engine'"}, "token": {"content": TOKEN},
             "endpoints": {"10.0.0.9:8000": None}, "cwd": "/", "netns": DRIVER_NETNS}
    bare = WorkerProbe.from_reply("tcp://10.0.0.1:40002", "10.0.0.1", reply)
    assert causes(expect(), probe(), bare) == [
        "worker tcp://10.0.0.1:40002: polis not importable (ModuleNotFoundError: No module named 'engine')"
    ]


def test_a_worker_with_another_polis_version_is_refused():
    (cause,) = causes(expect(), probe(polis=PolisIdentity("0.0.9", IDENTITY.source_hash, "/opt/old/engine")))
    assert cause.startswith("worker tcp://10.0.0.1:40001: runs Polis 0.0.9 from /opt/old/engine")
    assert "the driver runs Polis 0.1.0 from /srv/polis/engine" in cause


def test_an_edited_checkout_of_the_same_version_is_refused():
    (cause,) = causes(expect(), probe(polis=PolisIdentity("0.1.0", "fedcba9876543210", IDENTITY.path)))
    assert "source hash fedcba9876543210" in cause and "source hash 0123456789abcdef" in cause


def test_a_worker_that_cannot_read_the_token_names_the_path():
    error = f"FileNotFoundError: [Errno 2] No such file or directory: '{TOKEN_PATH}'"
    (cause,) = causes(expect(), probe(), remote(token_content=None, token_error=error))
    assert cause.startswith(f"worker tcp://10.0.0.2:40001: cannot read the run directory: reading the token file {TOKEN_PATH} failed")
    assert cause.endswith(error)


def test_a_relative_run_directory_is_reported_with_the_workers_cwd():
    relative = f"runs/r1/.preflight/{TOKEN}"
    (cause,) = causes(expect(token_path=relative), probe(token_content=None, token_error="FileNotFoundError: ..."))
    assert f"{relative} (relative to its cwd /home/worker)" in cause


def test_a_worker_that_reads_other_content_is_refused():
    (cause,) = causes(expect(), probe(token_content="stale"))
    assert cause == (f"worker tcp://10.0.0.1:40001: sees another run directory: the token file {TOKEN_PATH} "
                     "holds 'stale' instead of the token the driver wrote")


def test_an_unreachable_base_url_is_refused_per_worker():
    refused = {"10.0.0.9:8000": "ConnectionRefusedError: [Errno 111] Connect call failed ('10.0.0.9', 8000)"}
    assert causes(expect(), probe(), remote(endpoint_errors=refused)) == [
        "worker tcp://10.0.0.2:40001: cannot reach LLM role 'agent' at http://10.0.0.9:8000/v1 (10.0.0.9:8000): "
        "ConnectionRefusedError: [Errno 111] Connect call failed ('10.0.0.9', 8000)"
    ]


def test_an_endpoint_a_worker_did_not_probe_is_refused():
    (cause,) = causes(expect(), probe(endpoint_errors={}))
    assert cause.endswith("(10.0.0.9:8000): not probed")


def test_a_loopback_base_url_is_refused_on_a_remote_worker_only():
    loop = {"agent": LLMClient(model="openai/sim", base_url="http://127.0.0.1:8000/v1"),
            "coder": LLMClient(model="openai/sim", base_url="http://127.0.0.1:8000/v1")}
    ok = {"127.0.0.1:8000": None}
    (cause,) = causes(expect(loop), probe(endpoint_errors=ok), remote(endpoint_errors=ok))
    assert cause.startswith("worker tcp://10.0.0.2:40001: LLM roles 'agent', 'coder' at http://127.0.0.1:8000/v1 "
                            "is on the driver's loopback interface, and this worker (host 10.0.0.2) is not on the driver's machine")


@pytest.mark.parametrize("url", ["http://localhost:8000", "http://[::1]:8000", "http://0.0.0.0:8000"])
def test_every_spelling_of_loopback_counts(url):
    (endpoint,) = endpoints_of({"agent": LLMClient(model="openai/x", base_url=url)})
    assert endpoint.loopback


def test_a_local_model_is_refused_on_a_remote_worker_before_and_after_its_server_starts():
    before = {"agent": LLMClient(model="local/smollm2")}
    after = {"agent": LLMClient(model="openai/smollm2", base_url="http://127.0.0.1:41234")}
    (cause,) = causes(expect(before), probe(), remote())
    assert "LLM role 'agent' at local/smollm2 is served on the driver's 127.0.0.1" in cause
    (cause,) = causes(expect(after), probe(endpoint_errors={"127.0.0.1:41234": None}),
                      remote(endpoint_errors={"127.0.0.1:41234": None}))
    assert cause.startswith("worker tcp://10.0.0.2:40001: LLM role 'agent' at http://127.0.0.1:41234 is on the driver's loopback")


def test_loopback_is_fine_for_workers_on_the_driver_host_like_a_local_cluster():
    local = {"agent": LLMClient(model="local/smollm2"), "coder": LLMClient(model="openai/sim", base_url="http://127.0.0.1:8000")}
    workers = [probe(f"tcp://127.0.0.1:{port}", endpoint_errors={"127.0.0.1:8000": None}) for port in (40001, 40002)]
    assert causes(expect(local), *workers) == []


def test_without_network_namespaces_the_worker_address_decides():
    loop = {"agent": LLMClient(model="openai/sim", base_url="http://127.0.0.1:8000")}
    ok = {"127.0.0.1:8000": None}
    here = probe("tcp://10.0.0.1:40001", netns=None, endpoint_errors=ok)
    there = probe("tcp://10.0.0.2:40001", netns=None, endpoint_errors=ok)
    assert [p.worker for p in find_problems(expect(loop, driver_netns=None), [here, there])] == ["tcp://10.0.0.2:40001"]


def test_an_unanswered_worker_is_named_and_not_judged_further():
    assert causes(expect(), probe(), remote(unanswered="no answer within 30 s")) == [
        "worker tcp://10.0.0.2:40001: gave no answer to the preflight probe: no answer within 30 s"
    ]


def test_every_problem_of_every_worker_is_listed():
    bare = remote(polis=None, polis_error="ModuleNotFoundError: No module named 'engine'",
                  token_content=None, token_error="PermissionError: denied", endpoint_errors={"10.0.0.9:8000": "timed out"})
    assert len(causes(expect(), probe(token_content="x"), bare)) == 4


def test_endpoints_group_roles_by_url_skip_the_in_process_simulator_and_default_the_port():
    clients = {
        "agent": LLMClient(model="openai/gpt", base_url="https://api.example.com/v1"),
        "coder": LLMClient(model="openai/gpt", base_url="https://api.example.com/v1"),
        "judge": LLMClient(model="sim/default"),
        "plain": LLMClient(model="openai/x", base_url="http://llm.internal/v1"),
    }
    assert endpoints_of(clients) == (
        Endpoint(("agent", "coder"), "https://api.example.com/v1", "api.example.com", 443, False),
        Endpoint(("plain",), "http://llm.internal/v1", "llm.internal", 80, False),
    )


def test_a_base_url_without_host_is_refused_once_for_the_cluster():
    (cause,) = causes(expect({"agent": LLMClient(model="openai/x", base_url="localhost:8000")}), probe())
    assert cause == "LLM role 'agent' at localhost:8000: it names no host and port (http[s]://host[:port]/...)"


# ---- the probe, run in this process --------------------------------------------------------------------

def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def test_the_probe_reads_the_token_and_connects(tmp_path):
    token = tmp_path / "token"
    token.write_text("abc")
    closed = closed_port()
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        reply = await probe_worker(str(token), [["127.0.0.1", port], ["127.0.0.1", closed]], 5.0, 2.0)
    assert reply["token"] == {"content": "abc"}
    assert reply["endpoints"][f"127.0.0.1:{port}"] is None
    assert reply["endpoints"][f"127.0.0.1:{closed}"].startswith("ConnectionRefusedError")
    assert reply["polis"] == polis_identity() and reply["pid"] == os.getpid()
    missing = await probe_worker(str(tmp_path / "missing"), [], 5.0, 2.0)
    assert missing["token"]["error"].startswith("FileNotFoundError")


def test_the_source_hash_changes_with_a_file_of_the_package(tmp_path, monkeypatch):
    package = tmp_path / "engine"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tick.py").write_text("A = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(__import__("sys").modules, "engine")
    first = polis_identity()
    (package / "tick.py").write_text("A = 2\n")
    second = polis_identity()
    assert first["path"] == str(package) and first["source_hash"] != second["source_hash"]
