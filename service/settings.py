"""The service's settings, read from ``POLIS_*`` environment variables in one place.

``polis serve`` builds one :class:`ServiceSettings` and passes it down as a value; nothing else in
the service reads the environment.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["ServiceSettings"]


class ServiceSettings(BaseSettings):
    """Where the service keeps its data, which Dask scheduler it uses, and where it listens."""

    model_config = SettingsConfigDict(env_prefix="POLIS_", extra="ignore", frozen=True)

    #: Experiment records live under ``experiments/``, run directories under ``runs/``.
    data_dir: Path = Field(default=Path("~/.local/share/polis"))
    #: A Dask scheduler address (``tcp://host:8786``); ``None`` starts a LocalCluster.
    scheduler: str | None = None
    #: Worker processes for the LocalCluster; ``None`` lets the engine choose.
    n_workers: int | None = Field(default=None, ge=1)
    host: str = "127.0.0.1"
    port: int = Field(default=8400, ge=0, le=65535)

    @field_validator("data_dir")
    @classmethod
    def _expand_user(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("scheduler", mode="before")
    @classmethod
    def _empty_means_local(cls, value: object) -> object:
        # POLIS_SCHEDULER= (set but empty) reads as "no scheduler", not as an address "".
        return None if value == "" else value
