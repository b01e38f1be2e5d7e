"""Engine settings read once from the environment, at the edge (CLI), and passed down as values."""

from __future__ import annotations

from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["EngineSettings"]


class EngineSettings(BaseSettings):
    """``POLIS_*`` variables the CLI reads; workers never read the environment for these."""

    model_config = SettingsConfigDict(env_prefix="POLIS_")

    scheduler: str | None = None  #: POLIS_SCHEDULER: remote scheduler address; unset = LocalCluster
    n_workers: int | None = None  #: POLIS_N_WORKERS: LocalCluster worker processes
    dashboard_address: str = "127.0.0.1:8787"  #: POLIS_DASHBOARD_ADDRESS
