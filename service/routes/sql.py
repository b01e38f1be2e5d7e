"""``POST /experiments/{id}/sql``: read-only SQL over an experiment's datasets, as JSON, Arrow or Parquet."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header
from fastapi.responses import StreamingResponse

from service.admission.auth import Caller
from service.compute import Deadline
from service.schemas import SqlResult
from service.sql import (
    ARROW_STREAM_MEDIA_TYPE,
    JSON_MEDIA_TYPE,
    PARQUET_MEDIA_TYPE,
    SqlAnswer,
    SqlRequest,
    answer,
    choose_media_type,
    run_sql,
)
from service.state import State

__all__ = ["TRUNCATED_HEADER", "router"]

#: Arrow and Parquet answers say in this header whether the row limit cut the result.
TRUNCATED_HEADER = "X-Polis-Truncated"

router = APIRouter(prefix="/experiments", tags=["results"])


def _error(description: str, example: str) -> dict[str, object]:
    return {"description": description, "content": {JSON_MEDIA_TYPE: {"example": {"detail": example}}}}


@router.post(
    "/{experiment_id}/sql",
    response_model=SqlResult,
    responses={
        200: {
            "description": f"the rows: JSON by default, or by ``Accept`` the Arrow IPC stream or a Parquet file "
            f"(whose ``{TRUNCATED_HEADER}`` header says whether the row limit cut them)",
            "content": {ARROW_STREAM_MEDIA_TYPE: {}, PARQUET_MEDIA_TYPE: {}},
        },
        400: _error("the query is refused, with the reason (or its answer grew past the memory limit)",
                    "only SELECT statements are allowed, got COPY"),
        404: _error("no such experiment (or another owner's)", "experiment 'abc' not found"),
        406: _error("an Accept this endpoint cannot answer", "cannot answer Accept: text/csv; ..."),
        429: _error("the owner's (or the service's) concurrent queries are all running",
                    "lab-a has 2 SQL queries open, the most one owner may (POLIS_SQL_MAX_CONCURRENT_PER_OWNER=2)"),
    },
)
async def query_experiment(
    experiment_id: str,
    body: SqlRequest,
    state: State,
    caller: Caller,
    accept: Annotated[str | None, Header()] = None,
) -> StreamingResponse:
    """Run one read-only SELECT over the experiment's datasets (one view per dataset, and ``spans``).

    It goes through the same locked-down DuckDB reader as ``polis query``: reads outside the run,
    extensions, ``COPY``, ``ATTACH``, ``PRAGMA``, ``SET``, more than one statement, and functions
    that run SQL text or show the server's configuration or environment are refused with 400 and
    the reason. A query past ``POLIS_QUERY_TIMEOUT_S`` is stopped (400, "time limit"). At most
    ``max_rows`` rows come back (capped by ``POLIS_SQL_MAX_ROWS``); ``truncated`` says whether there
    were more. The answer, the result and the JSON (or Arrow, or Parquet) built from it together, is held
    to ``POLIS_QUERY_MEMORY_LIMIT`` (400 past it). Queries run on their own threads, never the pool the
    other routes share.
    """
    record = state.registry.get(experiment_id, caller)
    media_type = choose_media_type(accept)
    max_rows = state.sql_max_rows if body.max_rows is None else min(body.max_rows, state.sql_max_rows)

    def query(deadline: Deadline) -> SqlAnswer:
        result = run_sql(record.run_dir, body.sql, max_rows, state.query_limits)
        return answer(result, media_type, state.query_limits, checkpoint=deadline.check)

    # 429 when the owner's (or everyone's) queries fill their slots.
    found = await state.sql_work.run(caller.owner, query)
    headers = {"Content-Length": str(found.size)}
    if media_type != JSON_MEDIA_TYPE:
        headers[TRUNCATED_HEADER] = "true" if found.truncated else "false"
    # Streamed from the pieces built, each let go once sent: the answer is never joined into one more copy.
    return StreamingResponse(found.body(), media_type=media_type, headers=headers)
