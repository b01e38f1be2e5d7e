"""Serving the app with uvicorn, for ``polis serve``."""

from __future__ import annotations

import uvicorn

from service.app import create_app
from service.settings import ServiceSettings

__all__ = ["GRACEFUL_SHUTDOWN_S", "run"]

#: How long a stopping server waits for open requests: an event stream never ends by itself while its
#: experiment runs, so without a bound it would keep the service (and its experiments) from stopping.
GRACEFUL_SHUTDOWN_S = 5


def run(settings: ServiceSettings) -> None:
    """Serve the Polis API until interrupted.

    Args:
        settings: read once from the environment by the caller; ``host`` and ``port`` say where
            to listen.
    """
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level="info",
                timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
