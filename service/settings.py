"""The service's settings: the engine's ``POLIS_*`` settings tree plus where the service keeps data and listens.

``polis serve`` builds one :class:`ServiceSettings` and passes it down as a value; nothing else in
the service reads the environment.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import SettingsConfigDict

from engine.api import EngineSettings

__all__ = ["ServiceSettings"]


class ServiceSettings(EngineSettings):
    """Everything ``EngineSettings`` reads (scheduler, workers, dashboard, LLM limits, queries, inputs), plus:"""

    # grants_file is read from POLIS_GRANTS (its alias) and set by name in code.
    model_config = SettingsConfigDict(populate_by_name=True)

    #: POLIS_DATA_DIR: experiment records live under ``experiments/``, run directories under ``runs/``.
    data_dir: Path = Field(default=Path("~/.local/share/polis"))
    #: POLIS_RUN_STORE: keep run directories in object storage, ``<url>/<experiment id>`` (``s3://bucket/prefix``);
    #: unset keeps them under ``data_dir/runs``. Credentials and the endpoint come from the AWS environment.
    run_store: str | None = None
    host: str = "127.0.0.1"  #: POLIS_HOST: where the API listens
    port: int = Field(default=8400, ge=0, le=65535)  #: POLIS_PORT
    #: POLIS_AUTH_TOKENS: the token file (``service.admission.auth``); unset = no tokens, and the service binds
    #: only to loopback
    auth_tokens: Path | None = None
    #: POLIS_SQL_MAX_ROWS: the most rows one ``POST /experiments/{id}/sql`` answers with (a request may ask fewer)
    sql_max_rows: int = Field(default=10_000, ge=1)
    #: POLIS_SQL_MAX_CONCURRENT: SQL queries running at once over all owners; each may use POLIS_QUERY_MEMORY_LIMIT,
    #: so this times that limit is the service's memory budget for SQL
    sql_max_concurrent: int = Field(default=4, ge=1)
    #: POLIS_SQL_MAX_CONCURRENT_PER_OWNER: SQL queries one owner runs at once; more are answered 429
    sql_max_concurrent_per_owner: int = Field(default=2, ge=1)
    #: POLIS_EVENTS_MAX_STREAMS_PER_OWNER: event streams (GET .../events) one owner keeps open; more are answered 429
    events_max_streams_per_owner: int = Field(default=16, ge=1)
    #: POLIS_FIDELITY_MAX_CONCURRENT: fidelity scorings (POST .../fidelity) running at once over all owners, each on a
    #: thread of the scorings' own pool; more are answered 429
    fidelity_max_concurrent: int = Field(default=2, ge=1)
    #: POLIS_FIDELITY_MAX_CONCURRENT_PER_OWNER: fidelity scorings one owner runs at once; more are answered 429
    fidelity_max_concurrent_per_owner: int = Field(default=1, ge=1)
    #: POLIS_FIDELITY_TIMEOUT_S: a fidelity scoring running longer is stopped (422, naming this limit)
    fidelity_timeout_s: float = Field(default=60.0, gt=0)
    #: POLIS_ADMISSION_MAX_CONCURRENT: specs (submitted, forked, with added steps) checked at once over all owners, on
    #: the checks' own threads; more are answered 429
    admission_max_concurrent: int = Field(default=4, ge=1)
    #: POLIS_ADMISSION_MAX_CONCURRENT_PER_OWNER: specs of one owner checked at once; more are answered 429
    admission_max_concurrent_per_owner: int = Field(default=2, ge=1)
    #: POLIS_ADMISSION_TIMEOUT_S: a spec's check running longer is stopped (422, naming this limit)
    admission_timeout_s: float = Field(default=120.0, gt=0)
    #: POLIS_GRANTS: the credentials, endpoints and per-owner quotas the server grants (``service.admission.grants``);
    #: unset = none granted, every spec must use ``sim/*`` or ``local/*`` models
    grants_file: Path | None = Field(default=None, validation_alias="POLIS_GRANTS")
    #: POLIS_QUOTA_*: each owner's limits (``service.admission.quotas``), unless the grants file overrides them
    quota_max_agents: int = Field(default=10_000, ge=1)  #: POLIS_QUOTA_MAX_AGENTS: agents in one spec (each sweep cell)
    quota_max_agent_steps: int = Field(default=1_000_000, ge=1)  #: POLIS_QUOTA_MAX_AGENT_STEPS: agents x ticks x cells
    #: POLIS_MAX_RUNNING: experiments that run at once over all owners; the rest wait ``queued``
    max_running: int = Field(default=2, ge=1)
    quota_max_concurrent: int = Field(default=2, ge=1)  #: POLIS_QUOTA_MAX_CONCURRENT: running at once; more wait queued
    quota_max_disk_bytes: int = Field(default=20 * 1024**3, ge=0)  #: POLIS_QUOTA_MAX_DISK_BYTES: all the owner's run dirs
    quota_max_sweep_cells: int = Field(default=10_000, ge=1)  #: POLIS_QUOTA_MAX_SWEEP_CELLS: cells of one sweep
    quota_max_added_steps: int = Field(default=20, ge=1)  #: POLIS_QUOTA_MAX_ADDED_STEPS: steps one /steps request adds
    #: POLIS_QUOTA_MAX_LLM_CALLS_PER_DAY: LLM calls of all an owner's runs in one UTC day
    quota_max_llm_calls_per_day: int = Field(default=1_000_000, ge=0)
    #: POLIS_QUOTA_MAX_EDGES: edges the generated network layers of one run expect (each sweep cell), all layers together
    quota_max_edges: int = Field(default=2_000_000, ge=0)
    #: POLIS_DISK_REFRESH_S: how often running runs (and runs ended since) are measured for the disk quota
    disk_refresh_s: float = Field(default=30.0, gt=0)
    #: POLIS_DISK_RECONCILE_S: how old any run's measurement may grow before it is measured again (corrects drift)
    disk_reconcile_s: float = Field(default=600.0, gt=0)
    max_body_bytes: int = Field(default=1024**2, ge=1)  #: POLIS_MAX_BODY_BYTES: the largest request body of any route

    @field_validator("data_dir", "auth_tokens", "grants_file")
    @classmethod
    def _expand_user(cls, value: Path | None) -> Path | None:
        return value.expanduser() if value is not None else None
