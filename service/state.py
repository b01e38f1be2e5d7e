"""What the routes share: the registry, the submitter and its loop, the dashboard link, the query limits, the intake,
the pools that SQL queries and fidelity scorings run on."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request

from engine.api import EngineLoop, QueryLimits
from service.admission.auth import TokenStore
from service.admission.disk_usage import DiskLedger
from service.admission.intake import Intake
from service.admission.limits import Slots
from service.compute import ComputePool
from service.metrics import ServiceMetrics
from service.registry import ExperimentRegistry
from service.submission import Submitter

__all__ = ["ServiceState", "State", "get_state"]


@dataclass(frozen=True)
class ServiceState:
    """The live parts of one running service, set up by the app's lifespan."""

    registry: ExperimentRegistry  #: experiment records
    submitter: Submitter  #: runs experiments on the shared Dask client; call it through ``engine.call``
    engine: EngineLoop  #: the loop the Dask client and every run live on
    dashboard_link: str | None  #: the shared client's Dask dashboard, if it has one
    #: the dashboard page every experiment links (``engine.society.run.dashboard.experiment_page``), if any
    experiment_dashboard_link: str | None
    #: the bytes each owner's runs take, for the disk quota (refreshed every ``POLIS_DISK_REFRESH_S`` by the lifespan)
    disk: DiskLedger
    #: memory, threads and time for every DuckDB read of results (``EngineSettings.query_limits()``)
    query_limits: QueryLimits = QueryLimits()
    #: the bearer tokens (``POLIS_AUTH_TOKENS``); None = no file, one local admin caller on loopback
    tokens: TokenStore | None = None
    #: the most rows one SQL request answers with (``POLIS_SQL_MAX_ROWS``)
    sql_max_rows: int = 10_000
    #: what a submitted spec passes: body size, per-owner quotas (``intake.quotas``) and grants
    intake: Intake = field(default_factory=Intake)
    #: what the service measures itself (tick durations), for ``GET /metrics``
    metrics: ServiceMetrics = field(default_factory=ServiceMetrics)
    #: SQL queries: their own threads, and how many run at once per owner and in all
    #: (``POLIS_SQL_MAX_CONCURRENT[_PER_OWNER]``)
    sql_work: ComputePool = field(default_factory=lambda: ComputePool(
        Slots("SQL queries", (2, "POLIS_SQL_MAX_CONCURRENT_PER_OWNER"), (4, "POLIS_SQL_MAX_CONCURRENT")), "the query"))
    #: fidelity scorings: their own threads, how many run at once per owner and in all, and their time limit
    #: (``POLIS_FIDELITY_MAX_CONCURRENT[_PER_OWNER]``, ``POLIS_FIDELITY_TIMEOUT_S``)
    fidelity_work: ComputePool = field(default_factory=lambda: ComputePool(
        Slots("fidelity scorings", (1, "POLIS_FIDELITY_MAX_CONCURRENT_PER_OWNER"), (2, "POLIS_FIDELITY_MAX_CONCURRENT")),
        "the fidelity scoring", (60.0, "POLIS_FIDELITY_TIMEOUT_S")))
    #: event streams open per owner (``POLIS_EVENTS_MAX_STREAMS_PER_OWNER``)
    stream_slots: Slots = field(default_factory=lambda: Slots("event streams", (16, "POLIS_EVENTS_MAX_STREAMS_PER_OWNER")))


    @property
    def sql_slots(self) -> Slots:
        """The SQL queries running at once, per owner and in all."""
        return self.sql_work.slots

    def check_llm_calls(self, owner: str, what: str, wanted: int = 1) -> None:
        """Refuse ``what`` when ``owner``'s LLM calls left today (quota ``max_llm_calls_per_day``) are fewer than ``wanted``.

        Raises:
            QuotaExceededError: ``wanted`` is over the whole daily quota (422).
            DailyQuotaExceededError: over what is left today (429).
        """
        limit = self.intake.quotas.for_owner(owner).max_llm_calls_per_day
        self.submitter.llm_calls.check(owner, limit, wanted=wanted, what=what)


async def get_state(request: Request) -> ServiceState:
    """The service state of the app handling ``request`` (a FastAPI dependency; ``async``: no threadpool hop)."""
    state: ServiceState = request.app.state.polis
    return state


#: Route parameter type that injects the service state.
State = Annotated[ServiceState, Depends(get_state)]
