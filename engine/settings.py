"""The one settings tree of every ``POLIS_*`` variable, read once at the edge and passed down as values.

``EngineSettings`` holds what the engine needs (the CLI reads it); the service's ``ServiceSettings``
extends it, so ``polis run`` and ``polis serve`` read each variable the same way. Two variables are
read straight from ``os.environ`` on purpose: ``POLIS_FAILPOINTS`` and ``POLIS_FAILPOINT_PGID``
(:mod:`engine.failpoints`), test-only fault injection that every process, Dask workers included,
inherits and must see before any settings exist.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from engine.cluster_options import THREADS_PER_WORKER, ClusterOptions
from engine.llm.client import LimiterConfig
from engine.storage.query_limits import QueryLimits, check_memory_limit

if TYPE_CHECKING:
    from distributed.security import Security

# THREADS_PER_WORKER is the default of POLIS_THREADS_PER_WORKER (defined with the cluster's options).
__all__ = ["THREADS_PER_WORKER", "EngineSettings"]


class EngineSettings(BaseSettings):
    """``POLIS_*`` variables the CLI and the service read; workers never read the environment for these."""

    model_config = SettingsConfigDict(env_prefix="POLIS_", frozen=True)

    #: POLIS_SCHEDULER: remote scheduler address; unset = LocalCluster; ``in-process``: no cluster, the driver runs everything
    scheduler: str | None = None
    n_workers: int | None = Field(default=None, ge=1)  #: POLIS_N_WORKERS: LocalCluster worker processes; unset = one per core
    #: POLIS_THREADS_PER_WORKER: task slots per LocalCluster worker process
    threads_per_worker: int = Field(default=THREADS_PER_WORKER, ge=1)
    dashboard_address: str = "127.0.0.1:8787"  #: POLIS_DASHBOARD_ADDRESS: where a LocalCluster's dashboard listens
    #: POLIS_TLS_CA_FILE, POLIS_TLS_CERT, POLIS_TLS_KEY: talk to the scheduler over mutual TLS (``tls://``) with this
    #: CA and this certificate and key (the key may sit in the certificate's file); a LocalCluster then uses them too
    tls_ca_file: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    llm_concurrency: int = Field(default=16, ge=1)  #: POLIS_LLM_CONCURRENCY: each process's initial LLM limit
    llm_latency_degrade_factor: float = Field(default=4.0, gt=1)  #: POLIS_LLM_LATENCY_DEGRADE_FACTOR
    llm_slow_latency_ms: float | None = Field(default=None, gt=0)  #: POLIS_LLM_SLOW_LATENCY_MS: unset = relative only
    home: Path | None = None  #: POLIS_HOME: state kept across runs (the CodeGen template cache); unset = none
    query_memory_limit: str = "1GB"  #: POLIS_QUERY_MEMORY_LIMIT: DuckDB memory (and result size) per query surface
    query_threads: int = Field(default=2, ge=1)  #: POLIS_QUERY_THREADS: DuckDB threads per query surface
    query_timeout_s: float = Field(default=30.0, gt=0)  #: POLIS_QUERY_TIMEOUT_S: a longer query is stopped

    #: POLIS_INPUT_DIRS: directories (separated by ``os.pathsep``, like PATH) whose files a spec may
    #: name (``MobilitySpace.city_file``; over REST a population's ``from``), besides the run's ``inputs/`` and the bundled data
    input_dirs: Annotated[tuple[Path, ...], NoDecode] = ()

    _memory_limit_valid = field_validator("query_memory_limit")(classmethod(lambda cls, v: check_memory_limit(v)))

    @model_validator(mode="after")
    def _tls_whole(self) -> EngineSettings:
        if (self.tls_ca_file is None) != (self.tls_cert is None) or (self.tls_key is not None and self.tls_cert is None):
            raise ValueError("POLIS_TLS_CA_FILE and POLIS_TLS_CERT go together (and POLIS_TLS_KEY needs POLIS_TLS_CERT)")
        return self

    @field_validator("scheduler", mode="before")
    @classmethod
    def _empty_means_local(cls, value: object) -> object:
        # POLIS_SCHEDULER= (set but empty) reads as "no scheduler", not as an address "".
        return None if value == "" else value

    @field_validator("input_dirs", mode="before")
    @classmethod
    def _split_input_dirs(cls, value: object) -> object:
        if isinstance(value, str):
            return tuple(Path(part).expanduser().resolve() for part in value.split(os.pathsep) if part.strip())
        return value

    @property
    def template_cache_dir(self) -> Path | None:
        """Where CodeGen template caches shared by all runs live (``$POLIS_HOME/codegen_cache``), if anywhere.

        Each environment's tool set has its own file there, so a second run of the same
        environment starts with the first one's code (``EnvRouterConfig.template_cache_dir``).
        """
        return self.home / "codegen_cache" if self.home is not None else None

    def cluster_options(self) -> ClusterOptions:
        """The keyword arguments of ``open_client`` these settings choose."""
        return {
            "n_workers": self.n_workers,
            "threads_per_worker": self.threads_per_worker,
            "dashboard_address": self.dashboard_address,
            "security": self.security(),
        }

    def run_options(self) -> dict[str, Any]:
        """The keyword arguments every run driver gets from these settings (``run_experiment``, ``run_spec``,
        ``fork_experiment``): the LLM limiter, the CodeGen template cache, the allowed input folders."""
        return {"llm_limits": self.limiter_config(), "template_cache_dir": self.template_cache_dir,
                "input_dirs": self.input_dirs}

    def security(self) -> Security | None:
        """Dask's ``Security`` for ``POLIS_TLS_*``: encryption required, this certificate for every role; None unset."""
        if self.tls_ca_file is None or self.tls_cert is None:
            return None
        from distributed.security import Security

        cert, key = str(self.tls_cert), str(self.tls_key) if self.tls_key is not None else None
        return Security(require_encryption=True, tls_ca_file=str(self.tls_ca_file), tls_client_cert=cert,
                        tls_client_key=key, tls_scheduler_cert=cert, tls_scheduler_key=key, tls_worker_cert=cert,
                        tls_worker_key=key)

    def query_limits(self) -> QueryLimits:
        """The limits every ``ReplayReader`` query runs under (``polis query``, the service's reads)."""
        return QueryLimits(memory_limit=self.query_memory_limit, threads=self.query_threads, timeout_s=self.query_timeout_s)

    def limiter_config(self) -> LimiterConfig:
        """The AIMD limiter settings to put into each ``LLMClient.limits``."""
        return LimiterConfig(
            concurrency=self.llm_concurrency,
            latency_degrade_factor=self.llm_latency_degrade_factor,
            slow_latency_ms=self.llm_slow_latency_ms,
        )
