"""The service's settings: the engine's ``POLIS_*`` settings tree plus where the service keeps data and listens.

``polis serve`` builds one :class:`ServiceSettings` and passes it down as a value; nothing else in
the service reads the environment.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator

from engine.settings import EngineSettings

__all__ = ["ServiceSettings"]


class ServiceSettings(EngineSettings):
    """Everything ``EngineSettings`` reads (scheduler, workers, dashboard, LLM limits, queries, inputs), plus:"""

    #: POLIS_DATA_DIR: experiment records live under ``experiments/``, run directories under ``runs/``.
    data_dir: Path = Field(default=Path("~/.local/share/polis"))
    host: str = "127.0.0.1"  #: POLIS_HOST: where the API listens
    port: int = Field(default=8400, ge=0, le=65535)  #: POLIS_PORT
    #: POLIS_AUTH_TOKENS: the token file (``service.auth``); unset = no tokens, and the service binds
    #: only to loopback
    auth_tokens: Path | None = None
    #: POLIS_MAX_RUNNING: experiments that run at once over all owners; the rest wait ``queued``
    max_running: int = Field(default=2, ge=1)
    #: POLIS_QUOTA_MAX_CONCURRENT: experiments one owner runs at once (more are queued, not refused)
    quota_max_concurrent: int = Field(default=2, ge=1)

    @field_validator("data_dir", "auth_tokens")
    @classmethod
    def _expand_user(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None
