"""Read-only SQL over one run for the API: the request, the JSON result, and Arrow or Parquet by ``Accept``.

Queries go through the engine's :class:`~engine.storage.reader.ReplayReader`, the same locked-down
DuckDB surface as ``polis query``: one SELECT, file access only under the run, no extensions, no
configuration, under the service's time and memory limits (``POLIS_QUERY_*``). This module adds the
row limit (``POLIS_SQL_MAX_ROWS``; a request may ask for fewer) and the three representations.

JSON values are made JSON-safe: dates and times in ISO 8601, bytes in base64, NaN and infinities as
null, decimals as numbers (integers when integral, so big integers stay exact), intervals as
``{"months", "days", "nanoseconds"}``, durations in seconds, maps as ``[key, value]`` pairs.
"""

from __future__ import annotations

import base64
import datetime as dt
import io
import math
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from engine.api import CappedResult, QueryLimits, ReplayReader
from engine.errors import QueryError
from service.errors import NotAcceptableError
from service.schemas import SqlColumn, SqlResult

__all__ = [
    "ARROW_STREAM_MEDIA_TYPE",
    "JSON_MEDIA_TYPE",
    "PARQUET_MEDIA_TYPE",
    "SqlRequest",
    "choose_media_type",
    "json_result",
    "run_sql",
    "to_arrow_stream",
    "to_parquet",
]

JSON_MEDIA_TYPE = "application/json"
#: The Arrow IPC streaming format's registered media type.
ARROW_STREAM_MEDIA_TYPE = "application/vnd.apache.arrow.stream"
#: The registered media type of Parquet files.
PARQUET_MEDIA_TYPE = "application/vnd.apache.parquet"
_ANSWERS_JSON = frozenset({JSON_MEDIA_TYPE, "application/*", "*/*"})


class SqlRequest(BaseModel):
    """One read-only query over an experiment's datasets (views named after them) and ``spans``."""

    model_config = ConfigDict(extra="forbid")

    sql: str = Field(min_length=1, max_length=100_000, examples=["SELECT status, count(*) AS n FROM actions GROUP BY status"])
    #: at most this many rows come back (the service's ``POLIS_SQL_MAX_ROWS`` caps it)
    max_rows: int | None = Field(None, ge=0, description="return at most this many rows (the server's limit caps it)")


def choose_media_type(accept: str | None) -> str:
    """The representation to answer an ``Accept`` header with (JSON when there is none).

    Args:
        accept: the header's value; media ranges are tried by descending ``q``, then in order.

    Returns:
        ``application/json``, the Arrow stream type or the Parquet type.

    Raises:
        NotAcceptableError: the header accepts none of them.
    """
    if not accept or not accept.strip():
        return JSON_MEDIA_TYPE
    offers = []
    for position, part in enumerate(accept.split(",")):
        media, *params = (piece.strip() for piece in part.split(";"))
        quality = 1.0
        for param in params:
            if param.lower().startswith("q="):
                try:
                    quality = float(param[2:])
                except ValueError:
                    quality = 0.0
        if quality > 0 and media:
            offers.append((-quality, position, media.lower()))
    for _, _, media in sorted(offers):
        if media in _ANSWERS_JSON:
            return JSON_MEDIA_TYPE
        if media in (ARROW_STREAM_MEDIA_TYPE, PARQUET_MEDIA_TYPE):
            return media
    raise NotAcceptableError(
        f"cannot answer Accept: {accept}; this endpoint answers {JSON_MEDIA_TYPE}, {ARROW_STREAM_MEDIA_TYPE} "
        f"or {PARQUET_MEDIA_TYPE}"
    )


def run_sql(run_dir: Path | str, sql: str, max_rows: int, limits: QueryLimits) -> CappedResult:
    """Run one read-only SELECT over a run (or sweep) directory, keeping at most ``max_rows`` rows.

    Args:
        run_dir: the experiment's run directory; one that holds nothing yet has only an empty ``spans``.
        sql: the query.
        max_rows: the row limit.
        limits: time, memory and threads for the query.

    Raises:
        QueryError: the reader refused the query (with the reason), DuckDB rejected it, or it ran
            past a limit.
        StorageError: the run's catalog cannot be read.
    """
    with ReplayReader(run_dir, limits) as reader:
        return reader.query_capped(sql, max_rows)


def json_result(result: CappedResult) -> SqlResult:
    """The result as JSON-safe columns and rows.

    Raises:
        QueryError: a column holds values with no JSON form (ask for Arrow or Parquet instead).
    """
    table = result.table
    columns = [SqlColumn(name=field.name, type=str(field.type)) for field in table.schema]
    values = [_column_values(table.schema.field(i).name, table.column(i)) for i in range(table.num_columns)]
    rows = [list(row) for row in zip(*values, strict=True)] if values else []
    return SqlResult(columns=columns, rows=rows, truncated=result.truncated)


def to_arrow_stream(table: pa.Table) -> bytes:
    """The table in the Arrow IPC streaming format."""
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def to_parquet(table: pa.Table) -> bytes:
    """The table as one Parquet file."""
    buffer = io.BytesIO()
    pq.write_table(table, buffer)
    return buffer.getvalue()


def _column_values(name: str, column: pa.ChunkedArray) -> list[Any]:
    try:
        values = column.to_pylist()
    except (OverflowError, ValueError, pa.ArrowException):
        # Dates and times outside Python's range: Arrow's own text form.
        try:
            values = pc.cast(column, pa.string()).to_pylist()
        except pa.ArrowException as error:
            raise QueryError(f"column {name!r} ({column.type}) has values with no JSON form; ask for Arrow or Parquet") from error
    return [_json_safe(value) for value in values]


def _json_safe(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Decimal):
        if not value.is_finite():
            return None
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, pa.MonthDayNano):
        return {"months": value.months, "days": value.days, "nanoseconds": value.nanoseconds}
    if isinstance(value, dict):
        return {str(key): _json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_json_safe(item) for item in value]
    return str(value)
