"""LLMClient: the serializable description of one LLM connection (no secrets, no sockets)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from engine.llm_spec import PriceSpec

__all__ = ["LLMClient", "LimiterConfig"]


class LimiterConfig(BaseModel):
    """How a worker's AIMD limiter for one client starts and when it backs off (no upper bound)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    concurrency: int = Field(default=16, ge=1)  #: the initial limit on calls in flight per process
    latency_degrade_factor: float = Field(default=4.0, gt=1)  #: back off above this multiple of the healthy latency
    slow_latency_ms: float | None = Field(default=None, gt=0)  #: back off above this latency too; None = relative only
    timeout_s: float = Field(default=120.0, gt=0)  #: one request's time limit (a hung request is cancelled)


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
    limits: LimiterConfig = Field(default_factory=LimiterConfig)  #: the per-process AIMD limiter (not for ``sim/*``)
    cache_dir: str | None = None  #: the response cache's directory; None = no cache
    price: PriceSpec | None = None  #: the spec's token prices; None: litellm's price map prices the calls
    context_window: int | None = None  #: the model's window in tokens: longer prompts are refused unsent
    prompt_budget: int | None = None  #: the spec's context_budget (default role): agents compact memory to stay under it

    @property
    def is_sim(self) -> bool:
        """True for the built-in simulated LLM called in-process (``sim/<kind>[:<label>]``)."""
        return self.model.startswith("sim/") and self.base_url is None

    def identity(self) -> str:
        """What makes two clients the same model to check: its name, endpoint, key variable and options."""
        return self.model_dump_json(include={"model", "base_url", "api_key_env", "options"})

    def cache_key(self) -> str:
        """A stable key for per-process caches of backends built from this client."""
        return self.model_dump_json()
