"""Read-only SQL over one run for the API: the request, the JSON result, and Arrow or Parquet by ``Accept``.

Queries go through the engine's :class:`~engine.storage.reader.ReplayReader`, the same locked-down
DuckDB surface as ``polis query``: one SELECT, file access only under the run, no extensions, no
configuration, under the service's time and memory limits (``POLIS_QUERY_*``). This module adds the
row limit (``POLIS_SQL_MAX_ROWS``; a request may ask for fewer) and the three representations.

The memory limit holds for the whole answer: the reader stops a result that outgrows it, and :func:`answer`
counts the result and the bytes built from it (JSON, which can be several times the result, or Arrow or
Parquet) together against the same limit, refusing the query (400) once they pass it. JSON is built a few
rows at a time, and rows whose JSON cannot fit (a string's bytes are a floor on its JSON) are refused before
they are converted, so an answer over the limit is never built whole, and one under it never twice.

JSON values are made JSON-safe: dates and times in ISO 8601, bytes in base64, NaN and infinities as
null, decimals as numbers (integers when integral, so big integers stay exact), intervals as
``{"months", "days", "nanoseconds"}``, durations in seconds, maps as ``[key, value]`` pairs.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field

from engine.api import CappedResult, QueryLimits, ReplayReader
from engine.errors import QueryError
from service.errors import NotAcceptableError
from service.schemas import SqlColumn

__all__ = [
    "ARROW_STREAM_MEDIA_TYPE",
    "JSON_MEDIA_TYPE",
    "PARQUET_MEDIA_TYPE",
    "SqlAnswer",
    "SqlRequest",
    "answer",
    "choose_media_type",
    "run_sql",
]

JSON_MEDIA_TYPE = "application/json"
#: The Arrow IPC streaming format's registered media type.
ARROW_STREAM_MEDIA_TYPE = "application/vnd.apache.arrow.stream"
#: The registered media type of Parquet files.
PARQUET_MEDIA_TYPE = "application/vnd.apache.parquet"
_ANSWERS_JSON = frozenset({JSON_MEDIA_TYPE, "application/*", "*/*"})
_KINDS = {JSON_MEDIA_TYPE: "JSON", ARROW_STREAM_MEDIA_TYPE: "Arrow stream", PARQUET_MEDIA_TYPE: "Parquet file"}
#: JSON is built this many rows at a time at most ...
_JSON_GROUP_ROWS = 1024
#: ... and, past its first row, rows whose JSON is at least this many bytes (so a group's Python values stay small).
_JSON_GROUP_BYTES = 4 * 2**20
#: The answer's bytes are kept in pieces of about this size (neither one byte string per Arrow buffer, nor one whole).
_PIECE_BYTES = 2**20


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


@dataclass(frozen=True)
class SqlAnswer:
    """A query's answer as bytes, in pieces (joining them would hold the answer twice)."""

    media_type: str
    pieces: list[bytes]
    truncated: bool  #: the row limit cut the result

    @property
    def size(self) -> int:
        """The answer's bytes."""
        return sum(len(piece) for piece in self.pieces)

    async def body(self) -> AsyncIterator[bytes]:
        """The pieces, in order; each is let go once it has been handed on (for a streamed response)."""
        self.pieces.reverse()
        while self.pieces:
            yield self.pieces.pop()


def answer(result: CappedResult, media_type: str, limits: QueryLimits,
           checkpoint: Callable[[], None] = lambda: None) -> SqlAnswer:
    """The result as ``media_type``, held with the result to the query's memory limit.

    Args:
        result: the query's rows.
        media_type: ``application/json``, the Arrow stream type or the Parquet type.
        limits: ``memory_limit`` bounds the result and the answer built from it, together.
        checkpoint: called between groups of JSON rows; what it raises stops the building.

    Raises:
        QueryError: the answer would pass the memory limit (with the limit), or a column has no JSON form.
    """
    table = result.table
    sink = _Sink(limits.memory_bytes - table.nbytes, limits.memory_limit, _KINDS[media_type])
    if media_type == JSON_MEDIA_TYPE:
        _write_json(table, result.truncated, sink, checkpoint)
    elif media_type == ARROW_STREAM_MEDIA_TYPE:
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
    else:
        pq.write_table(table, sink)
    return SqlAnswer(media_type, sink.finish(), result.truncated)


class _Sink:
    """A write-only file that keeps what it is given in pieces, and refuses (QueryError) past ``budget`` bytes."""

    def __init__(self, budget: int, memory_limit: str, kind: str) -> None:
        self.budget, self.memory_limit, self.kind = budget, memory_limit, kind
        self.written = 0
        self.closed = False
        self._pieces: list[bytes] = []
        self._pending = bytearray()

    def need(self, size: int) -> None:
        """Refuse now if ``size`` more bytes would pass the budget."""
        if self.written + size > self.budget:
            raise QueryError(f"the answer (the query's result and the {self.kind} built from it) grew past its "
                             f"{self.memory_limit} memory limit and was stopped; select fewer rows or columns")

    def write(self, data: bytes | bytearray | memoryview) -> int:
        size = memoryview(data).nbytes
        self.need(size)
        self.written += size
        if size >= _PIECE_BYTES and not self._pending:
            self._pieces.append(bytes(data))
        else:
            self._pending += data
            if len(self._pending) >= _PIECE_BYTES:
                self._pieces.append(bytes(self._pending))
                self._pending.clear()
        return size

    def tell(self) -> int:
        return self.written

    def writable(self) -> bool:
        return True

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def finish(self) -> list[bytes]:
        """The pieces written, the last included."""
        if self._pending:
            self._pieces.append(bytes(self._pending))
            self._pending.clear()
        return self._pieces


def _write_json(table: pa.Table, truncated: bool, sink: _Sink, checkpoint: Callable[[], None]) -> None:
    """The table as ``SqlResult``'s JSON (columns, rows, truncated), a group of rows at a time."""
    columns = [SqlColumn(name=field.name, type=str(field.type)).model_dump() for field in table.schema]
    sink.write(b'{"columns":' + _dumps(columns) + b',"rows":[')
    floors = _json_floors(table) if table.num_columns else np.zeros(0, dtype=np.int64)  # no columns, no rows
    for start, stop in _row_groups(floors):
        checkpoint()
        sink.need(int(floors[start:stop].sum()))  # these rows' JSON cannot fit: refuse before converting them
        part = table.slice(start, stop - start)
        values = [_column_values(part.schema.field(i).name, part.column(i)) for i in range(part.num_columns)]
        text = b",".join(_dumps(row) for row in zip(*values, strict=True))
        sink.write(b"," + text if start else text)
    sink.write(b'],"truncated":' + (b"true" if truncated else b"false") + b"}")


def _dumps(value: Any) -> bytes:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()


def _json_floors(table: pa.Table) -> np.ndarray:
    """For each row, bytes its JSON takes at least: brackets and commas, a byte per value, and a string's (or
    bytes') own length and quotes; a floor, so rows whose floor will not fit can be refused unconverted."""
    floors = np.full(table.num_rows, 2 + max(table.num_columns - 1, 0), dtype=np.int64)
    for column in table.columns:
        kind = column.type
        if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_binary(kind) \
                or pa.types.is_large_binary(kind):
            lengths = pc.fill_null(pc.binary_length(column), 2).to_numpy(zero_copy_only=False)
            floors += lengths.astype(np.int64) + 2
        else:
            floors += 1
    return floors


def _row_groups(floors: np.ndarray) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` of consecutive rows: at most ``_JSON_GROUP_ROWS``, and past one row under
    ``_JSON_GROUP_BYTES`` of JSON floor."""
    start, total = 0, 0
    for row, floor in enumerate(floors.tolist()):
        if row > start and (row - start >= _JSON_GROUP_ROWS or total + floor > _JSON_GROUP_BYTES):
            yield start, row
            start, total = row, 0
        total += floor
    if start < len(floors):
        yield start, len(floors)


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
