"""Why the real offline model cannot run here, for the tests that need it (None: it can)."""

from __future__ import annotations

from engine.llm.local import LocalModelMissingError, gguf_path
from engine.llm.local.models import require_server_runtime

__all__ = ["why_no_local_model"]


def why_no_local_model(name: str = "smollm2") -> str | None:
    """The reason from the engine's own checks (the llama.cpp server wheel, then the model's GGUF), or None."""
    try:
        require_server_runtime()
        gguf_path(name)
    except LocalModelMissingError as error:
        return str(error)
    return None
