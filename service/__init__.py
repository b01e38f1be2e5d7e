"""Polis service: the HTTP control plane. Submit experiment specs, watch them, download results.

``create_app`` and ``run`` are imported lazily, so that reading settings or records does not start
loading Dask and the engine's run machinery.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from service.settings import ServiceSettings

if TYPE_CHECKING:
    from service.app import create_app
    from service.server import run

__all__ = ["ServiceSettings", "create_app", "run"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from service.app import create_app

        return create_app
    if name == "run":
        from service.server import run

        return run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
