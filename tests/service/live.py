"""A live service for tests: the app in a real uvicorn server on 127.0.0.1, and polling helpers."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import uvicorn

from service.app import create_app
from service.server import GRACEFUL_SHUTDOWN_S
from service.settings import ServiceSettings

__all__ = ["FINAL_STATUSES", "serve", "wait_until_final"]

#: How long a stopping server may take before a test calls it hung.
SHUTDOWN_HANG_S = 120.0

#: Statuses after which an experiment changes no more.
FINAL_STATUSES = frozenset({"completed", "completed_with_errors", "failed", "cancelled", "interrupted", "budget_exhausted"})


@contextlib.contextmanager
def serve(settings: ServiceSettings, startup_timeout: float = 120.0, token: str | None = None,
          apps: list[Any] | None = None) -> Iterator[httpx.Client]:
    """Run the app in a real uvicorn server on 127.0.0.1 (a free port), in a background thread.

    Args:
        settings: the service's settings.
        startup_timeout: how long the lifespan may take to start (only bounds a hang: a busy machine is slow).
        token: a bearer token the yielded client sends with every request.
        apps: a list the app is appended to (a test that looks at its state: ``apps[0].state.polis``).

    Yields:
        An httpx client for the server (``client.base_url`` reaches it with any other token too).
        On exit the server shuts down, running the lifespan exit.
    """
    app = create_app(settings)
    if apps is not None:
        apps.append(app)
    config = uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="polis-test-uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("uvicorn stopped during startup (see the log for the lifespan error)")
        if time.monotonic() > deadline:
            server.should_exit = True
            raise TimeoutError(f"uvicorn did not start within {startup_timeout} s")
        time.sleep(0.05)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        headers = {"Authorization": f"Bearer {token}"} if token else None
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30, headers=headers) as http:
            yield http
    finally:
        server.should_exit = True
        # Only bounds a hang: shutdown waits up to 30 s for running experiments to stop, longer on a busy machine.
        thread.join(timeout=SHUTDOWN_HANG_S)
        assert not thread.is_alive(), f"uvicorn did not shut down within {SHUTDOWN_HANG_S} s"


def wait_until_final(http: httpx.Client, experiment_id: str, timeout: float = 120.0) -> dict[str, Any]:
    """Poll ``GET /experiments/{id}`` until its status is final; return the last body."""
    deadline = time.monotonic() + timeout
    while True:
        response = http.get(f"/experiments/{experiment_id}")
        response.raise_for_status()
        body = response.json()
        if body["status"] in FINAL_STATUSES:
            return body
        if time.monotonic() > deadline:
            raise TimeoutError(f"experiment {experiment_id} still {body['status']} after {timeout} s: {body}")
        time.sleep(0.25)


