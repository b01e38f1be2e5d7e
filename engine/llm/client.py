"""LLMClient: the serializable description of one LLM connection (no secrets, no sockets)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["LLMClient"]


class LLMClient(BaseModel):
    """Connection settings for one role. Travels inside ServiceProxy to workers and actors.

    The key is never stored: ``api_key_env`` names the environment variable that holds it, and
    the worker resolves it from its own environment at call time.
    """

    model_config = ConfigDict(frozen=True)

    role: str = "default"
    model: str = "sim/default"
    base_url: str | None = None
    api_key_env: str | None = None
    options: dict[str, Any] = Field(default_factory=dict)
    seed: int = 0  #: the experiment seed (the simulated LLM derives its answers from it)

    @property
    def is_sim(self) -> bool:
        """True for the built-in simulated LLM called in-process (``sim/<name>``)."""
        return self.model.startswith("sim/") and self.base_url is None

    def cache_key(self) -> str:
        """A stable key for per-process caches of backends built from this client."""
        return self.model_dump_json()
