"""The DaskCluster's scheduler and worker commands, run here as the pods would run them.

The scheduler starts from its container's args and ``DASK_*`` env, a worker from its args with the env the
operator adds (``DASK_SCHEDULER_ADDRESS``, ``DASK_WORKER_NAME``, which the kubelet substitutes into
``$(DASK_WORKER_NAME)``); only the addresses are moved to free ports on 127.0.0.1, and the Secret
polis-dask-tls's files to a certificate made here. The worker must join over TLS with the name, threads
and memory limit the manifest gives, a client must present that certificate (without it the scheduler
refuses it), and the scheduler must answer the route the operator's autoscaler reads
(``/api/v1/adaptive_target``).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from dask.utils import parse_bytes
from distributed import Client
from distributed.security import Security

from engine.settings import THREADS_PER_WORKER
from tests.deploy.manifests import env_of, manifests, one


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def with_values(args: list[str], values: dict[str, str]) -> list[str]:
    """``args`` with the value after each flag of ``values`` replaced (a flag it lacks is appended)."""
    out = list(args)
    for flag, value in values.items():
        if flag in out:
            out[out.index(flag) + 1] = value
        else:
            out += [flag, value]
    return out


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in reversed(started):
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def wait_for_health(url: str, process: subprocess.Popen[bytes], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert process.poll() is None, f"exited with {process.returncode}"
        try:
            if httpx.get(url, timeout=2).text == "ok":
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"{url} did not answer ok in {timeout_s} s")


def test_the_daskclusters_commands_start_a_cluster_the_autoscaler_can_read(tmp_path: Path, processes):
    cluster = one(manifests(), "DaskCluster")["spec"]
    [scheduler], [worker] = cluster["scheduler"]["spec"]["containers"], cluster["worker"]["spec"]["containers"]
    base = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    base.pop("PYTHONPATH", None)  # the image has Polis installed; these commands need only dask
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"  # the Secret's files, made as docs/deploy.md makes them
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=polis-dask",
                    "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True, timeout=60)
    tls = {"--tls-ca-file": str(cert), "--tls-cert": str(cert), "--tls-key": str(key)}
    port, dashboard = free_port(), free_port()
    scheduler_env = {**base, **{name: entry["value"] for name, entry in env_of(scheduler).items()}}
    args = with_values(scheduler["args"], {"--host": "127.0.0.1", "--port": str(port), "--dashboard-address": f"127.0.0.1:{dashboard}",
                                           **tls})
    processes.append(subprocess.Popen(args, env=scheduler_env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    wait_for_health(f"http://127.0.0.1:{dashboard}/health", processes[-1])

    name = "polis-default-worker-0"
    worker_env = {**base, "DASK_SCHEDULER_ADDRESS": f"tcp://127.0.0.1:{port}", "DASK_WORKER_NAME": name}
    args = [arg.replace("$(DASK_WORKER_NAME)", name) for arg in worker["args"]]
    assert args[2] == "tls://polis-scheduler:8786"
    args[2] = f"tls://127.0.0.1:{port}"
    args = with_values(args, {"--dashboard-address": f"127.0.0.1:{free_port()}", "--host": "127.0.0.1", **tls})
    processes.append(subprocess.Popen(args, env=worker_env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

    with pytest.raises(OSError):  # plain TCP: refused  # noqa: PT011
        Client(f"tcp://127.0.0.1:{port}", timeout=5)
    security = Security(require_encryption=True, tls_ca_file=str(cert), tls_client_cert=str(cert), tls_client_key=str(key))
    with Client(f"tls://127.0.0.1:{port}", security=security, timeout=30) as client:
        client.wait_for_workers(1, timeout=60)
        [joined] = client.scheduler_info()["workers"].values()
    assert joined["name"] == name and joined["nthreads"] == THREADS_PER_WORKER
    assert joined["memory_limit"] == parse_bytes(args[args.index("--memory-limit") + 1])
    answer = httpx.get(f"http://127.0.0.1:{dashboard}/api/v1/adaptive_target", timeout=10)
    assert answer.status_code == 200 and answer.json()["workers"] >= 0
