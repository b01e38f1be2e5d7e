"""The app factory: one FastAPI app, one shared Dask client for its whole life, on the engine's own loop."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from engine.api import EngineLoop
from engine.errors import PolisError, SpecError
from service.admission.auth import TokenStore
from service.admission.disk_usage import DiskLedger
from service.admission.intake import Intake
from service.admission.limits import BodyLimit, Slots, validation_error_response
from service.admission.llm_usage import LlmCallLedger
from service.compute import ComputePool
from service.errors import ServiceError, SpecRejectedError, TooManyRequestsError, UnauthorizedError, status_code_for
from service.openapi import declare_errors
from service.registry import ExperimentRegistry
from service.report.page import mount_bokeh_static
from service.routes import agents, events, experiments, forks, health, metrics, report, results, session, sql, steps
from service.routes.docs import install_docs
from service.settings import ServiceSettings
from service.state import ServiceState
from service.submission import Submitter, cluster_dashboard, experiment_page, open_shell

__all__ = ["create_app"]

logger = logging.getLogger(__name__)


def create_app(settings: ServiceSettings) -> FastAPI:
    """Build the Polis HTTP API.

    Args:
        settings: where data lives, which scheduler (or LocalCluster, and its dashboard) to use, and the
            engine settings every run and read gets.

    Returns:
        The app. On startup it opens the shared shell (``open_shell``: the scheduler's client, a
        LocalCluster's, or ``POLIS_SCHEDULER=in-process``: this process) on an :class:`~engine.engine_loop.EngineLoop`, where every run then executes;
        requests are answered on uvicorn's loop. Experiments still running at shutdown are cancelled
        and marked ``interrupted`` (``resume_on_start``); at start-up, what the last process left
        queued or running is queued again.
    """

    tokens = TokenStore.load(settings.auth_tokens) if settings.auth_tokens is not None else None
    intake = Intake.from_settings(settings)

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        registry = ExperimentRegistry(settings.data_dir, run_store=settings.run_store)
        engine = EngineLoop()
        stack = contextlib.AsyncExitStack()
        try:
            shared = await engine.run(stack.enter_async_context(open_shell(settings.scheduler, **settings.cluster_options())))
            submitter = Submitter(registry, shared, run_options=settings.run_options(), max_running=settings.max_running, max_concurrent=lambda owner: intake.quotas.for_owner(owner).max_concurrent,
                llm_calls=LlmCallLedger(settings.data_dir / "llm_calls.json"),
                daily_calls=lambda owner: intake.quotas.for_owner(owner).max_llm_calls_per_day)
            dashboard, experiment_dashboard = await engine.run(cluster_dashboard(shared.client)), await engine.run(experiment_page(shared.client))
            disk = DiskLedger(registry, reconcile_s=settings.disk_reconcile_s)
            app.state.polis = ServiceState(
                registry, submitter, engine, dashboard, experiment_dashboard, disk,
                query_limits=settings.query_limits(), tokens=tokens, sql_max_rows=settings.sql_max_rows, intake=intake,
                metrics=submitter.metrics,
                sql_work=ComputePool(
                    Slots("SQL queries", (settings.sql_max_concurrent_per_owner, "POLIS_SQL_MAX_CONCURRENT_PER_OWNER"),
                          (settings.sql_max_concurrent, "POLIS_SQL_MAX_CONCURRENT")), "the query"),
                fidelity_work=ComputePool(
                    Slots("fidelity scorings",
                          (settings.fidelity_max_concurrent_per_owner, "POLIS_FIDELITY_MAX_CONCURRENT_PER_OWNER"),
                          (settings.fidelity_max_concurrent, "POLIS_FIDELITY_MAX_CONCURRENT")),
                    "the fidelity scoring", (settings.fidelity_timeout_s, "POLIS_FIDELITY_TIMEOUT_S")),
                stream_slots=Slots("event streams", (settings.events_max_streams_per_owner, "POLIS_EVENTS_MAX_STREAMS_PER_OWNER")),
            )
            logger.info("polis service: data in %s, dashboard at %s", settings.data_dir, app.state.polis.dashboard_link)
            if adopted := await engine.call(submitter.adopt):
                logger.info("polis service: %d experiment(s) queued again after the restart", len(adopted))
            refresher = asyncio.create_task(_refresh_disk(disk, settings.disk_refresh_s))
            try:
                yield
            finally:
                refresher.cancel()
                app.state.polis.sql_work.shutdown()  # running queries and scorings end at their next check
                app.state.polis.fidelity_work.shutdown()
                intake.work.shutdown()
                await engine.run(submitter.shutdown())
                submitter.llm_calls.flush()
        finally:
            await engine.run(stack.aclose())
            engine.stop()

    app = FastAPI(
        title="Polis",
        summary="Batch experiments of LLM-agent social simulations on Dask",
        lifespan=lifespan,
        docs_url=None,  # served offline by service.routes.docs
        redoc_url=None,
    )
    app.include_router(experiments.router)
    app.include_router(results.router)
    app.include_router(agents.router)
    app.include_router(report.router)
    app.include_router(sql.router)
    app.include_router(steps.router)
    app.include_router(forks.router)
    app.include_router(events.router)
    app.include_router(health.router)
    app.include_router(metrics.router)
    app.include_router(session.router)
    install_docs(app)
    mount_bokeh_static(app)
    declare_errors(app)
    errors = partial(_error_response, data_dirs=sorted({str(settings.data_dir), str(settings.data_dir.resolve())}, key=len,
                                                       reverse=True))
    app.add_exception_handler(ServiceError, errors)
    app.add_exception_handler(PolisError, errors)
    app.add_exception_handler(RequestValidationError, validation_error_response)
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    return app


async def _refresh_disk(disk: DiskLedger, every_s: float) -> None:
    """Keep the disk ledger current: at start-up, then every ``every_s`` (off the event loop)."""
    while True:
        try:
            await asyncio.to_thread(disk.refresh)
        except Exception:  # a run directory unreadable for a moment must not end the refreshes
            logger.exception("polis service: measuring the runs' disk use failed; trying again in %s s", every_s)
        await asyncio.sleep(every_s)


async def _error_response(request: Request, error: Exception, *, data_dirs: list[str]) -> JSONResponse:
    code = status_code_for(error)
    if code >= 500:
        logger.error("%s %s failed", request.method, request.url.path, exc_info=error)
    detail: Any = str(error)
    for data_dir in data_dirs:  # an answer never names a server path
        detail = detail.replace(data_dir, "<data>")
    headers = {"WWW-Authenticate": "Bearer"} if isinstance(error, UnauthorizedError) else None
    if isinstance(error, TooManyRequestsError):
        headers = {"Retry-After": str(error.retry_after_s)}
    if isinstance(error, SpecError | SpecRejectedError):
        # The same shape FastAPI gives request validation errors, so clients parse one format.
        loc = ["body", *(int(p) if p.isdigit() else p for p in error.path.split(".") if p)]
        detail = [{"type": "spec_error", "loc": loc, "msg": detail}]
    return JSONResponse(status_code=code, content={"detail": detail}, headers=headers)

