"""Errors of the offline model layer (all under the engine's ``LLMError``).

    LLMError
    └── LocalModelError           the offline model layer
        ├── LocalModelMissingError  an unknown name, or the extra / model package not installed
        └── LocalServerError        the llama.cpp child did not become healthy (stderr tail kept)
"""

from __future__ import annotations

from engine.errors import LLMError

__all__ = ["LocalModelError", "LocalModelMissingError", "LocalServerError"]


class LocalModelError(LLMError):
    """The offline model layer."""


class LocalModelMissingError(LocalModelError):
    """A ``local/<name>`` that is unknown or whose packages are not installed."""


class LocalServerError(LocalModelError):
    """The llama.cpp server process died or did not answer its health check in time.

    Args:
        message: what went wrong, including the tail of the child's stderr.
        stderr_tail: the last lines the child wrote to stderr.
    """

    def __init__(self, message: str, *, stderr_tail: str = "") -> None:
        super().__init__(message)
        self.stderr_tail = stderr_tail
