"""Polis service: the HTTP control plane. Submit experiment specs, watch them, download results.

Everything here is imported lazily: reading settings or records does not load Dask and the
engine's run machinery, and ``service.client`` (httpx, pyyaml, pyarrow) loads no engine code at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from service.app import create_app
    from service.server import run
    from service.settings import ServiceSettings

__all__ = ["ServiceSettings", "create_app", "run"]


def __getattr__(name: str) -> Any:
    if name == "ServiceSettings":
        from service.settings import ServiceSettings

        return ServiceSettings
    if name == "create_app":
        from service.app import create_app

        return create_app
    if name == "run":
        from service.server import run

        return run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
