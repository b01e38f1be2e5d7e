"""The spec's LLM clients: which model each role talks to, how, and at what price (part of :mod:`engine.spec`)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["LLMClientSpec", "LLMSpec", "PriceSpec"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PriceSpec(_Frozen):
    """A client's token prices, for estimates of models litellm's price map does not know (or prices otherwise)."""

    input_usd_per_mtok: float = Field(ge=0, description="US dollars per million prompt tokens")
    output_usd_per_mtok: float = Field(ge=0, description="US dollars per million completion tokens")

    def cost(self, input_tokens: float, output_tokens: float) -> float:
        """US dollars for that many tokens."""
        return (input_tokens * self.input_usd_per_mtok + output_tokens * self.output_usd_per_mtok) / 1e6


class LLMClientSpec(_Frozen):
    """One LLM client: a litellm model string (or ``sim/<name>``), never a key."""

    model: str = Field("sim/default", min_length=1, description="litellm model string, or sim/<name> for the simulated LLM")
    base_url: str | None = Field(None, description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1")
    api_key_env: str | None = Field(
        None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="NAME of the environment variable holding the key (resolved on the worker)",
    )
    options: dict[str, Any] = Field(default_factory=dict, description="request options: temperature, max_tokens, ...")
    price: PriceSpec | None = Field(
        None, description="token prices for polis estimate and the run's recorded cost_usd (default: litellm's price map)")

    @field_validator("options")
    @classmethod
    def _no_secret_in_options(cls, value: dict[str, Any]) -> dict[str, Any]:
        for key in value:
            if key.lower() in {"api_key", "key", "token", "authorization"}:
                raise ValueError(f"option {key!r} would store a secret in the spec; use api_key_env instead")
        return value


class LLMSpec(_Frozen):
    """LLM clients by role. ``coder`` (used by env routers) falls back to ``default``."""

    default: LLMClientSpec = Field(default_factory=LLMClientSpec)
    coder: LLMClientSpec | None = None
