"""Serve the simulated LLM, or any ASGI app, from a background thread (tests, benchmarks, notebooks)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

from engine.llm.sim.faults import SimFaults
from engine.llm.sim.model import SimLLM
from engine.llm.sim.server import create_app

__all__ = ["serving", "serving_app"]


@contextlib.contextmanager
def serving_app(app: Any, *, host: str = "127.0.0.1", port: int = 0, keep_alive_s: int = 60,
                servers: list[uvicorn.Server] | None = None) -> Iterator[str]:
    """Run any ASGI ``app`` on a real uvicorn server in a background thread; yield its base URL (``http://HOST:PORT``).

    Args:
        host: interface to bind (loopback).
        port: 0 picks a free port.
        keep_alive_s: idle connections' lifetime: longer than clients' idle pools, so a reused connection is never
            half-closed.
        servers: a list the server is appended to (for a caller that watches its connections).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((host, port))
    bound = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(
        app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2, timeout_keep_alive=keep_alive_s,
    ))
    if servers is not None:
        servers.append(server)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # only bounds a hang
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError(f"the server for {type(app).__name__} did not start")
        time.sleep(0.01)
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


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
    with serving_app(create_app(sim or SimLLM(seed=1), faults or SimFaults()), host=host, port=port) as url:
        yield url
