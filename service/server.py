"""Serving the app with uvicorn, for ``polis serve``."""

from __future__ import annotations

import uvicorn

from service.app import create_app
from service.settings import ServiceSettings

__all__ = ["run"]


def run(settings: ServiceSettings) -> None:
    """Serve the Polis API until interrupted.

    Args:
        settings: read once from the environment by the caller; ``host`` and ``port`` say where
            to listen.
    """
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level="info")
