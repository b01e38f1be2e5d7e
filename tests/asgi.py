"""Any ASGI app on a real uvicorn server on 127.0.0.1, in a background thread, for tests that need one over HTTP."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import uvicorn

__all__ = ["serving_app"]


@contextlib.contextmanager
def serving_app(app: Any, *, keep_alive_s: int = 60, servers: list[uvicorn.Server] | None = None) -> Iterator[str]:
    """Serve ``app`` on a free port; yield its base URL (``http://127.0.0.1:<port>``). The server goes into
    ``servers``, for a test that watches its connections."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", timeout_keep_alive=keep_alive_s))
    if servers is not None:
        servers.append(server)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60  # only bounds a hang
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the test server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
