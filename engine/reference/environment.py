"""The reference's ``AGENTSOCIETY_*`` variables, honoured when a run comes from its files.

The reference reads its LLM, its limits and its home directory from the environment; a user who
swaps its command for ``polis run --config ... --steps ...`` keeps those shell settings:

- ``AGENTSOCIETY_LLM_{MODEL,API_BASE,API_KEY}``: the default client, called as ``openai/<model>`` at
  ``<base>/chat/completions``. The spec names the key's *variable* (``api_key_env``), never its value.
- ``AGENTSOCIETY_CODER_LLM_{MODEL,API_BASE,API_KEY}``: the router's client; each one falls back to
  the default's.
- ``AGENTSOCIETY_LLM_REQUEST_TIMEOUT`` (60 s), ``AGENTSOCIETY_LLM_RAY_CONCURRENCY`` (the limiter's
  starting limit, 16), ``AGENTSOCIETY_LLM_LATENCY_DEGRADE_FACTOR`` (4), ``AGENTSOCIETY_LLM_SLOW_LATENCY_MS``:
  the per-process limiter; a ``POLIS_LLM_*`` variable that is set wins.
- ``AGENTSOCIETY_LLM_RAY_MAX_WORKERS``: the spec's ``max_workers`` (batches in flight);
  ``AGENTSOCIETY_BATCH_SIZE`` (256): its ``batch_size``.
- ``AGENTSOCIETY_HOME_DIR``: where the CodeGen template cache persists (``POLIS_HOME`` wins).
- ``AGENTSOCIETY_EMBEDDING_*`` configure no Polis part (the template cache embeds with
  ``environment.embedder``); :meth:`ReferenceSettings.unused` names them so the CLI can say so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from engine.llm.client import LimiterConfig
from engine.settings import EngineSettings
from engine.spec import ExperimentSpec, LLMClientSpec, LLMSpec

__all__ = ["KEY_VARIABLES", "ReferenceSettings"]

#: the variables that hold keys, by client role: the spec names them, never their values
KEY_VARIABLES = {"default": "AGENTSOCIETY_LLM_API_KEY", "coder": "AGENTSOCIETY_CODER_LLM_API_KEY"}


class ReferenceSettings(BaseSettings):
    """``AGENTSOCIETY_*`` variables; read once by the CLI when the run comes from the reference's files."""

    model_config = SettingsConfigDict(env_prefix="AGENTSOCIETY_", frozen=True, extra="ignore")

    llm_model: str | None = None  #: AGENTSOCIETY_LLM_MODEL: called as openai/<model>
    llm_api_base: str | None = None  #: AGENTSOCIETY_LLM_API_BASE: OpenAI-compatible base URL
    llm_api_key: SecretStr | None = None  #: AGENTSOCIETY_LLM_API_KEY: only whether it is set is used here
    coder_llm_model: str | None = None  #: AGENTSOCIETY_CODER_LLM_MODEL (default: llm_model)
    coder_llm_api_base: str | None = None  #: AGENTSOCIETY_CODER_LLM_API_BASE (default: llm_api_base)
    coder_llm_api_key: SecretStr | None = None  #: AGENTSOCIETY_CODER_LLM_API_KEY (default: llm_api_key)
    embedding_model: str | None = None  #: AGENTSOCIETY_EMBEDDING_MODEL: no Polis equivalent
    embedding_api_base: str | None = None  #: AGENTSOCIETY_EMBEDDING_API_BASE: no Polis equivalent
    embedding_api_key: SecretStr | None = None  #: AGENTSOCIETY_EMBEDDING_API_KEY: no Polis equivalent
    embedding_dims: int | None = None  #: AGENTSOCIETY_EMBEDDING_DIMS: no Polis equivalent
    llm_request_timeout: float = Field(default=60.0, gt=0)  #: AGENTSOCIETY_LLM_REQUEST_TIMEOUT, seconds
    llm_ray_concurrency: int = Field(default=16, ge=1)  #: AGENTSOCIETY_LLM_RAY_CONCURRENCY: the limiter's start
    llm_ray_max_workers: int | None = Field(default=None, ge=1)  #: AGENTSOCIETY_LLM_RAY_MAX_WORKERS: batches in flight
    batch_size: int = Field(default=256, ge=1)  #: AGENTSOCIETY_BATCH_SIZE: agents per batch
    llm_latency_degrade_factor: float = Field(default=4.0, gt=1)  #: AGENTSOCIETY_LLM_LATENCY_DEGRADE_FACTOR
    llm_slow_latency_ms: float | None = Field(default=None, gt=0)  #: AGENTSOCIETY_LLM_SLOW_LATENCY_MS
    home_dir: Path | None = None  #: AGENTSOCIETY_HOME_DIR: state kept across runs

    def _client(self, model: str | None, base: str | None, key_env: str | None) -> LLMClientSpec | None:
        if model is None:
            return None
        return LLMClientSpec(model=f"openai/{model}", base_url=base, api_key_env=key_env)

    def llm_spec(self) -> LLMSpec | None:
        """The spec's LLM clients; None when no ``AGENTSOCIETY_LLM_MODEL`` is set (the spec's default stays)."""
        default_key = KEY_VARIABLES["default"] if self.llm_api_key is not None else None
        default = self._client(self.llm_model, self.llm_api_base, default_key)
        coder_key = KEY_VARIABLES["coder"] if self.coder_llm_api_key is not None else default_key
        coder = None
        if {"coder_llm_model", "coder_llm_api_base", "coder_llm_api_key"} & self.model_fields_set:
            coder = self._client(self.coder_llm_model or self.llm_model, self.coder_llm_api_base or self.llm_api_base,
                                 coder_key)
        if default is None and coder is None:
            return None
        return LLMSpec(default=default or LLMClientSpec(), coder=coder)

    def apply(self, spec: ExperimentSpec) -> ExperimentSpec:
        """``spec`` with the LLM clients, batch size and batches in flight these variables set."""
        update: dict[str, Any] = {"batch_size": self.batch_size, "max_workers": self.llm_ray_max_workers}
        llm = self.llm_spec()
        if llm is not None:
            update["llm"] = llm
        return ExperimentSpec.model_validate({**spec.model_dump(), **update})

    def limiter_config(self, polis: EngineSettings) -> LimiterConfig:
        """The limiter: these variables, except where a ``POLIS_LLM_*`` variable is set."""
        ours = polis.model_fields_set
        return LimiterConfig(
            concurrency=polis.llm_concurrency if "llm_concurrency" in ours else self.llm_ray_concurrency,
            latency_degrade_factor=(polis.llm_latency_degrade_factor if "llm_latency_degrade_factor" in ours
                                    else self.llm_latency_degrade_factor),
            slow_latency_ms=polis.llm_slow_latency_ms if "llm_slow_latency_ms" in ours else self.llm_slow_latency_ms,
            timeout_s=self.llm_request_timeout,
        )

    def template_cache_dir(self, polis: EngineSettings) -> Path | None:
        """Where the CodeGen template cache persists: ``$POLIS_HOME``'s, else ``$AGENTSOCIETY_HOME_DIR/codegen_cache``."""
        if polis.template_cache_dir is not None or self.home_dir is None:
            return polis.template_cache_dir
        return self.home_dir.expanduser().resolve() / "codegen_cache"

    def unused(self) -> list[str]:
        """The set variables Polis has no part for."""
        names = ("embedding_model", "embedding_api_base", "embedding_api_key", "embedding_dims")
        return [f"AGENTSOCIETY_{name.upper()}" for name in names if name in self.model_fields_set]
