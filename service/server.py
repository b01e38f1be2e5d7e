"""Serving the app with uvicorn, for ``polis serve``; a service without tokens listens on loopback only."""

from __future__ import annotations

import ipaddress
import logging

import uvicorn

from service.admission.auth import TokenStore
from service.app import create_app
from service.errors import AuthConfigError
from service.registry import make_data_dirs
from service.settings import ServiceSettings

__all__ = ["GRACEFUL_SHUTDOWN_S", "check_listen_address", "is_loopback", "run"]

#: How long a stopping server waits for open requests: an event stream never ends by itself while its
#: experiment runs, so without a bound it would keep the service (and its experiments) from stopping.
GRACEFUL_SHUTDOWN_S = 5


def is_loopback(host: str) -> bool:
    """Whether ``host`` names only this machine (``localhost``, ``127.0.0.0/8``, ``::1``)."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_listen_address(settings: ServiceSettings) -> str:
    """Check that the service may listen where ``settings`` say; return what to log about its callers.

    Raises:
        AuthConfigError: no token file (every caller would be the local admin) and a host that
            is not loopback; or a token file that cannot be used.
    """
    if settings.auth_tokens is None:
        if not is_loopback(settings.host):
            raise AuthConfigError(
                f"POLIS_HOST={settings.host} is not a loopback address, and no POLIS_AUTH_TOKENS is set: every "
                "caller would be an admin. Create tokens (polis token create --owner NAME --file PATH), set "
                "POLIS_AUTH_TOKENS=PATH, or listen on 127.0.0.1"
            )
        return "no POLIS_AUTH_TOKENS: loopback only, every caller is the local admin"
    store = TokenStore.load(settings.auth_tokens)
    return f"POLIS_AUTH_TOKENS: {len(store)} token(s) of {len(store.owners())} owner(s) in {settings.auth_tokens}"


def run(settings: ServiceSettings) -> None:
    """Serve the Polis API until interrupted.

    Args:
        settings: read once from the environment by the caller; ``host`` and ``port`` say where
            to listen.

    Raises:
        AuthConfigError: see :func:`check_listen_address`; the grants file cannot be used.
        StorageError: the data directory cannot be used (:func:`~service.registry.make_data_dirs`).
    """
    message = check_listen_address(settings)
    make_data_dirs(settings.data_dir, settings.run_store)  # an unusable data directory: said here, not at startup
    config = uvicorn.Config(create_app(settings), host=settings.host, port=settings.port, log_level="info",
                            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
    # uvicorn.Config has set up uvicorn's loggers; this line shows among its own startup lines.
    logging.getLogger("uvicorn.error").info("polis service: %s", message)
    uvicorn.Server(config).run()
