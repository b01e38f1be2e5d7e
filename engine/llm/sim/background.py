"""Serve the simulated LLM from a background thread (tests, benchmarks, notebooks)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import uvicorn

from engine.llm.sim.faults import SimFaults
from engine.llm.sim.model import SimLLM
from engine.llm.sim.server import create_app

__all__ = ["serving"]


@contextlib.contextmanager
def serving(
    sim: SimLLM | None = None, faults: SimFaults | None = None, *, host: str = "127.0.0.1", port: int = 0
) -> Iterator[str]:
    """Run a real uvicorn server for the simulated LLM; yield its base URL (``http://127.0.0.1:PORT``).

    Args:
        sim: the model (default: ``SimLLM(seed=1)``).
        faults: injected faults (default: none).
        host: interface to bind (loopback).
        port: 0 picks a free port.
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    app = create_app(sim or SimLLM(seed=1), faults or SimFaults())
    server = uvicorn.Server(uvicorn.Config(
        app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2,
        timeout_keep_alive=60,  # longer than clients' idle pools, so a reused connection is never half-closed
    ))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the simulated LLM server did not start")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
