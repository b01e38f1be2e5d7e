"""The provider key: read from the worker's environment by the variable's *name*, never shown.

Every transport resolves the key at call time with :func:`resolve_api_key` and passes every
error text through :func:`scrub` before it can reach an exception (and so a replay row or a log).
"""

from __future__ import annotations

import os

from engine.errors import LLMCallError
from engine.llm.client import LLMClient

__all__ = ["NO_KEY", "resolve_api_key", "scrub"]

#: Sent to an OpenAI-compatible ``base_url`` when the client names no key variable (local servers
#: ignore it; some OpenAI-compatible clients refuse to send no key at all).
NO_KEY = "sk-no-key"


def resolve_api_key(client: LLMClient) -> str | None:
    """The key for ``client`` from this process's environment, now.

    Returns:
        The variable's value; :data:`NO_KEY` when no variable is named and a ``base_url`` is set;
        None when neither (the provider's own default applies).

    Raises:
        LLMCallError: the named variable is not set.
    """
    name = client.api_key_env
    if name is None:
        return NO_KEY if client.base_url else None
    value = os.environ.get(name)
    if value is None:
        raise LLMCallError(f"environment variable {name} (the key for role {client.role!r}) is not set")
    return value


def scrub(text: str, key: str | None) -> str:
    """``text`` with every occurrence of ``key`` replaced by ``***``."""
    return text.replace(key, "***") if key else text
