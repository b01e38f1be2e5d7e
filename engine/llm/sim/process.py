"""``polis sim-llm`` in its own process: the simulated LLM as users run it, for tests and benchmarks.

A server in a background thread shares the client's GIL and flatters or slows the client; a
separate process is what an OpenAI-compatible endpoint (vLLM, llama.cpp, a provider) looks like.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

__all__ = ["SimLLMProcess", "sim_llm_process"]


@dataclass(frozen=True)
class SimLLMProcess:
    """A running ``polis sim-llm`` child."""

    url: str  #: ``http://127.0.0.1:PORT`` (the OpenAI base URL is ``url + "/v1"``)
    pid: int

    @property
    def base_url(self) -> str:
        return self.url + "/v1"

    def stats(self) -> dict[str, Any]:
        """The server's ``/stats`` (calls per kind, outcomes, max in flight)."""
        with urllib.request.urlopen(self.url + "/stats", timeout=10) as response:
            return json.loads(response.read())

    def cpu_seconds(self) -> float:
        """User + system CPU the server process has used (from /proc; Linux)."""
        with open(f"/proc/{self.pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def sim_llm_process(*, host: str = "127.0.0.1", port: int | None = None, name: str = "default", seed: int = 0,
                    start_timeout_s: float = 60.0, **faults: float | int | str | None) -> Iterator[SimLLMProcess]:
    """Start ``polis sim-llm`` in a child process and yield it once ``/health`` answers.

    Args:
        host: the interface (loopback).
        port: the TCP port (None: a free one); a later server on an earlier one's port stands in for
            a provider that changed what it serves behind the same address.
        name: the model name.
        seed: the answers' seed.
        start_timeout_s: how long to wait for the server to answer.
        **faults: ``polis sim-llm`` options by their Python names (``latency_ms=200``, ``capacity=2000``,
            ``rate_429=0.3``, ``served_model="gpt-x-2026"`` ...); None leaves an option at its default.
    """
    port = _free_port(host) if port is None else port
    argv = [sys.executable, "-m", "engine.cli", "sim-llm", "--host", host, "--port", str(port), "--name", name, "--seed", str(seed)]
    for key, value in faults.items():
        if value is not None:
            argv += [f"--{key.replace('_', '-')}", str(value)]
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, start_new_session=True)
    url = f"http://{host}:{port}"
    try:
        deadline = time.monotonic() + start_timeout_s
        while True:
            try:
                with urllib.request.urlopen(url + "/health", timeout=1):
                    break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"polis sim-llm did not start (exit code {process.poll()})") from None
                time.sleep(0.05)
        yield SimLLMProcess(url, process.pid)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
