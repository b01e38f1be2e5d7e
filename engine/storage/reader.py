"""The read-only SQL surface over a run: DuckDB views over replay shards and trace spans.

One in-memory DuckDB connection gets a view per catalogued dataset and a ``spans`` view, then is
locked down: file access only under the run's ``replay`` and ``trace`` directories, no changes to
that configuration, and :meth:`ReplayReader.query` accepts only a single SELECT statement (the
lock alone would still allow ``COPY ... TO`` into the replay directory and ``ATTACH``), checked by
:func:`~engine.storage.sql_guard.check_read_only_select`, which also refuses the functions that run
SQL text of their own (``query()``) or show the server's configuration, environment or secrets.

Every query runs under :class:`~engine.storage.query_limits.QueryLimits`: DuckDB's ``memory_limit``
and ``threads`` are set before the configuration is locked (so no SQL can raise them), nothing
spills to disk, a timer thread interrupts a query that runs past ``timeout_s`` (DuckDB has no
statement timeout), and the Arrow result is streamed and refused once it outgrows the memory limit
(DuckDB's limit does not cover results handed to Python). :meth:`ReplayReader.query_capped` also
stops a result at a number of rows and says whether it cut it.

Which datasets, and whether the trace, have files is decided when the reader opens (reopen to see a
first shard); shards added later to a dataset that already had one are visible to later queries,
since each view globs at query time. A dataset's view has the catalog's columns first, in order;
shards are unioned by column name, so a column that older shards lack (a run resumed by a newer
engine that added it) reads as NULL in their rows.

A sweep root (``SWEEP.json``, see :mod:`engine.storage.sweep_layout`) reads as one run: each
dataset, and ``spans``, is a view over every cell's files with leading columns ``cell``,
``replication``, ``seed`` and one ``param_<path>`` per grid key, and a ``cells`` table holds one
row per cell (its statuses as of opening). File access is allowed only under the cells' ``replay``
and ``trace`` directories. The cell comes from each file's path, never from hive partitioning,
which DuckDB would also apply to any ``key=value`` directory above the run and let it override
a real column.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb
import pyarrow as pa

from engine.errors import QueryError, StorageError
from engine.storage.catalog import Catalog, DatasetSchema
from engine.storage.query_limits import QueryLimits
from engine.storage.run_layout import REPLAY_DIR, TRACE_DIR, RunLayout
from engine.storage.sql_guard import check_read_only_select
from engine.storage.sweep_layout import SWEEP_COLUMNS, SweepManifest, cells_table, param_column, read_sweep_manifest
from engine.storage.text_table import format_table

__all__ = ["SPAN_COLUMNS", "CappedResult", "QueryLimits", "ReplayReader", "format_table"]

#: Rows per Arrow batch while a result streams in (its size is checked after each batch).
_RESULT_BATCH_ROWS = 2048

_DUCKDB_TYPES = {
    "int64": "BIGINT",
    "float64": "DOUBLE",
    "string": "VARCHAR",
    "bool": "BOOLEAN",
    "timestamp": "TIMESTAMP",
    "json": "VARCHAR",
    "list<string>": "VARCHAR[]",
}

#: Columns of the ``spans`` view (one row per recorded span); ``attrs`` is JSON.
SPAN_COLUMNS: dict[str, str] = {
    "trace_id": "VARCHAR",
    "span_id": "VARCHAR",
    "parent_id": "VARCHAR",
    "name": "VARCHAR",
    "start_unix_ms": "DOUBLE",
    "duration_ms": "DOUBLE",
    "status": "VARCHAR",
    "attrs": "JSON",
}


@dataclass(frozen=True)
class CappedResult:
    """A query's result cut at a number of rows."""

    table: pa.Table  #: at most the rows asked for
    truncated: bool  #: the query had more rows than that


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _no_rows(columns: dict[str, str]) -> str:
    """A SELECT of no rows with ``columns`` (name -> DuckDB type)."""
    return "SELECT " + ", ".join(f"CAST(NULL AS {t}) AS {_ident(c)}" for c, t in columns.items()) + " WHERE false"


def _empty_view_sql(name: str, columns: dict[str, str]) -> str:
    return f"CREATE VIEW {_ident(name)} AS {_no_rows(columns)}"


def _catalogued(schema: DatasetSchema, source: str) -> str:
    """The rows of ``source`` with the catalog's columns first, in its order and types.

    A column no shard has (a resumed run's older shards, before a newer engine added it) reads as
    NULL. DuckDB drops the empty side at planning, so projections and filters still reach the files.
    """
    return f"{_no_rows({c.name: _DUCKDB_TYPES[c.type] for c in schema.columns})} UNION ALL BY NAME SELECT * FROM {source}"


#: The column sweep views read each row's source file into (to find its cell); dropped from the view.
_FILE_COLUMN = "_polis_source_file"
_CELL_OF_FILE = {"replay": rf"/cell=([0-9]+)/{REPLAY_DIR}/[^/]+/[^/]+$", "trace": rf"/cell=([0-9]+)/{TRACE_DIR}/[^/]+$"}


def _sql_list(items: list[str]) -> str:
    return "[" + ", ".join(_literal(i) for i in items) + "]"


def _source(kind: str, globs: list[str], *options: str) -> str:
    # hive_partitioning=false: DuckDB would otherwise turn any key=value directory on the path into a column.
    if kind == "trace":
        columns = "{" + ", ".join(f"{_literal(c)}: {_literal(t)}" for c, t in SPAN_COLUMNS.items()) + "}"
        call, args = "read_json", ["format='newline_delimited'", f"columns={columns}"]
    else:
        call, args = "read_parquet", ["union_by_name=true"]
    return f"{call}({', '.join([_sql_list(globs), *args, 'hive_partitioning=false', *options])})"


def _sweep_schemas(sweep: SweepManifest) -> dict[str, DatasetSchema]:
    # Cells of one sweep register the same datasets unless the grid changes the env modules; the
    # first cell to register a name gives its schema (its view's columns), unless a later cell's has
    # more (a cell resumed by a newer engine grew it: Catalog.register).
    schemas: dict[str, DatasetSchema] = {}
    for cell in sweep.cells:
        for name, schema in Catalog(RunLayout(sweep.cell_dir(cell.index)).replay).load().items():
            if name not in schemas or len(schema.columns) > len(schemas[name].columns):
                schemas[name] = schema
    return schemas


def _has_files(directory: Path, suffix: str) -> bool:
    return directory.is_dir() and any(
        p.name.endswith(suffix) and not p.name.startswith(".") for p in directory.iterdir()
    )


class ReplayReader:
    """Query one run's replay datasets and trace spans with DuckDB.

    Use as a context manager, or call :meth:`close`. Queries may run from several threads.

    Args:
        run_dir: the run directory holding ``replay/`` and ``trace/``, or a sweep root (``SWEEP.json``).
        limits: memory, threads and time for each query (``EngineSettings.query_limits()``);
            the defaults (1GB, 2 threads, 30 s) suit callers that have no settings.

    Raises:
        StorageError: the catalog or sweep manifest is malformed, a sweep's dataset has a column
            the sweep views add, or DuckDB could not set up the views.
    """

    def __init__(self, run_dir: Path, limits: QueryLimits | None = None) -> None:
        self.limits = limits if limits is not None else QueryLimits()
        self.run_dir = Path(run_dir).resolve()
        self.replay_dir = RunLayout(self.run_dir).replay
        self.trace_dir = RunLayout(self.run_dir).trace
        #: The sweep manifest when ``run_dir`` is a sweep root, else None.
        self.sweep = read_sweep_manifest(self.run_dir)
        self._schemas = Catalog(self.replay_dir).load() if self.sweep is None else _sweep_schemas(self.sweep)
        self._lock = threading.Lock()
        self._con: duckdb.DuckDBPyConnection | None = duckdb.connect(":memory:")
        try:
            self._setup(self._con)
        except duckdb.Error as exc:
            self.close()
            raise StorageError(f"cannot open the replay of {self.run_dir}: {exc}") from exc
        except StorageError:
            self.close()
            raise

    def _setup(self, con: duckdb.DuckDBPyConnection) -> None:
        readable = self._run_views(con) if self.sweep is None else self._sweep_views(con, self.sweep)
        allowed = ", ".join(_literal(f"{d}/") for d in readable)
        # Order matters (RUNTIME_NOTES): allow-list first, then cut external access, then lock.
        # An empty temp_directory keeps DuckDB from adding its spill directory to the allow-list
        # (and from spilling: a query over the memory limit fails instead of filling a disk).
        con.execute("SET temp_directory = ''")
        con.execute(f"SET memory_limit = {_literal(self.limits.memory_limit)}")
        con.execute(f"SET threads = {int(self.limits.threads)}")
        con.execute(f"SET allowed_directories = [{allowed}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET autoload_known_extensions = false")
        con.execute("SET lock_configuration = true")

    def _run_views(self, con: duckdb.DuckDBPyConnection) -> list[Path]:
        for name, schema in sorted(self._schemas.items()):
            directory = self.replay_dir / name
            if _has_files(directory, ".parquet"):
                source = _source("replay", [str(directory / "*.parquet")])
                con.execute(f"CREATE VIEW {_ident(name)} AS {_catalogued(schema, source)}")
            else:
                con.execute(_empty_view_sql(name, {c.name: _DUCKDB_TYPES[c.type] for c in schema.columns}))
        if _has_files(self.trace_dir, ".jsonl"):
            con.execute(f"CREATE VIEW spans AS SELECT * FROM {_source('trace', [str(self.trace_dir / '*.jsonl')])}")
        else:
            con.execute(_empty_view_sql("spans", SPAN_COLUMNS))
        return [self.replay_dir, self.trace_dir]

    def _sweep_views(self, con: duckdb.DuckDBPyConnection, sweep: SweepManifest) -> list[Path]:
        added = [*SWEEP_COLUMNS, *(param_column(p) for p in sweep.params)]
        taken = {c.lower() for c in added} | {_FILE_COLUMN}
        if "cells" in self._schemas:
            raise StorageError("a dataset named 'cells' clashes with the sweep's cells table")
        con.register("_polis_cells", cells_table(sweep))
        con.execute("CREATE TABLE cells AS SELECT * FROM _polis_cells")
        con.unregister("_polis_cells")
        picked = ", ".join(f"c.{_ident(c)}" for c in added)

        def view(name: str, columns: dict[str, str], kind: str, suffix: str, schema: DatasetSchema | None = None) -> None:
            clash = sorted(c for c in columns if c.lower() in taken)
            if clash:
                raise StorageError(f"{name!r} has column(s) {clash} that a sweep view adds itself; it cannot be read as a sweep")
            layouts = [RunLayout(sweep.cell_dir(c.index)) for c in sweep.cells]
            dirs = [layout.trace if kind == "trace" else layout.replay / name for layout in layouts]
            globs = [str(d / f"*{suffix}") for d in dirs if _has_files(d, suffix)]
            if not globs:
                nulls = ", ".join(f"CAST(NULL AS {t}) AS {_ident(c)}" for c, t in columns.items())
                con.execute(f"CREATE VIEW {_ident(name)} AS SELECT {picked}, {nulls} FROM cells AS c WHERE false")
                return
            source = _source(kind, globs, f"filename={_literal(_FILE_COLUMN)}")
            if schema is not None:
                source = f"({_catalogued(schema, source)})"
            cell = f"CAST(regexp_extract(d.{_FILE_COLUMN}, {_literal(_CELL_OF_FILE[kind])}, 1) AS BIGINT)"
            con.execute(
                f"CREATE VIEW {_ident(name)} AS SELECT {picked}, d.* EXCLUDE ({_FILE_COLUMN}) "
                f"FROM {source} AS d JOIN cells AS c ON c.cell = {cell}"
            )

        for name, schema in sorted(self._schemas.items()):
            view(name, {c.name: _DUCKDB_TYPES[c.type] for c in schema.columns}, "replay", ".parquet", schema)
        view("spans", SPAN_COLUMNS, "trace", ".jsonl")
        return [d for c in sweep.cells for d in (RunLayout(sweep.cell_dir(c.index)).replay, RunLayout(sweep.cell_dir(c.index)).trace)]

    def __enter__(self) -> ReplayReader:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the DuckDB connection; further queries raise :class:`QueryError`."""
        with self._lock:
            if self._con is not None:
                self._con.close()
                self._con = None

    def datasets(self) -> list[str]:
        """Return the names of all catalogued datasets, sorted (``spans`` is not one of them)."""
        return sorted(self._schemas)

    def schema(self, name: str) -> DatasetSchema:
        """Return a dataset's schema.

        Raises:
            StorageError: no dataset of that name is catalogued.
        """
        try:
            return self._schemas[name]
        except KeyError:
            raise StorageError(f"unknown dataset {name!r}; known: {', '.join(self.datasets()) or 'none'}") from None

    def count(self, name: str) -> int:
        """Return the number of rows in a dataset.

        Raises:
            StorageError: no dataset of that name is catalogued.
            QueryError: DuckDB failed to read it.
        """
        self.schema(name)
        return int(self.query(f"SELECT count(*) AS n FROM {_ident(name)}").column("n")[0].as_py())

    def query(self, sql: str, params: list[Any] | dict[str, Any] | None = None) -> pa.Table:
        """Run one read-only SELECT statement.

        Args:
            sql: exactly one SELECT statement (``WITH``, ``FROM x``, ``DESCRIBE``, ``SHOW`` included).
            params: values for ``?`` or ``$name`` placeholders.

        Returns:
            The result as an Arrow table.

        Raises:
            QueryError: not exactly one statement, not a SELECT, a function the surface refuses
                (:mod:`engine.storage.sql_guard`), the reader is closed, DuckDB rejected the query
                (DuckDB's message is kept), or the query ran past one of its :attr:`limits` (time,
                memory, result size) and was stopped.
        """
        return self._run(sql, params, None).table

    def query_capped(self, sql: str, max_rows: int, params: list[Any] | dict[str, Any] | None = None) -> CappedResult:
        """Run one read-only SELECT statement as :meth:`query` does, keeping at most ``max_rows`` rows.

        Rows past the cap are never fetched: the result stops streaming there.

        Args:
            sql: exactly one SELECT statement.
            max_rows: the most rows to return (at least 0).
            params: values for ``?`` or ``$name`` placeholders.

        Returns:
            The rows, and whether the query had more.

        Raises:
            QueryError: as for :meth:`query`.
        """
        return self._run(sql, params, max(0, int(max_rows)))

    def _run(self, sql: str, params: list[Any] | dict[str, Any] | None, max_rows: int | None) -> CappedResult:
        with self._lock:
            if self._con is None:
                raise QueryError("the replay reader is closed")
            cursor = self._con.cursor()
        limits = self.limits
        watchdog: _Watchdog | None = None
        try:
            check_read_only_select(sql, cursor)
            watchdog = _Watchdog(cursor, limits.timeout_s)
            relation = cursor.sql(sql, params=params)
            batches, size, rows, truncated = [], 0, 0, False
            reader = relation.to_arrow_reader(_RESULT_BATCH_ROWS)
            for batch in reader:
                if max_rows is not None and rows + batch.num_rows > max_rows:
                    batch, truncated = batch.slice(0, max_rows - rows), True
                size += batch.nbytes
                if size > limits.memory_bytes:
                    raise QueryError(
                        f"the query's result grew past its {limits.memory_limit} memory limit and was stopped; "
                        "select fewer rows or columns"
                    )
                batches.append(batch)
                rows += batch.num_rows
                if truncated:
                    break
            return CappedResult(pa.Table.from_batches(batches, schema=reader.schema), truncated)
        except (duckdb.Error, OSError, pa.ArrowException) as exc:
            # While a result streams, DuckDB's errors reach us through Arrow as OSError text.
            raise _query_error(exc, limits, timed_out=watchdog is not None and watchdog.fired) from exc
        finally:
            if watchdog is not None:
                watchdog.stop()
            cursor.close()


def _query_error(exc: BaseException, limits: QueryLimits, *, timed_out: bool) -> QueryError:
    message = str(exc)
    if timed_out:  # the interrupt can surface as another error type mid-fetch
        return QueryError(f"the query ran past its {limits.timeout_s:g} s time limit and was stopped")
    if isinstance(exc, duckdb.OutOfMemoryException) or message.startswith("Out of Memory Error"):
        detail = message.splitlines()[0]
        return QueryError(f"the query needed more than its {limits.memory_limit} memory limit and was stopped ({detail})")
    return QueryError(message)


class _Watchdog:
    """Interrupts ``cursor`` after ``timeout_s`` unless stopped first (DuckDB has no statement timeout)."""

    def __init__(self, cursor: duckdb.DuckDBPyConnection, timeout_s: float) -> None:
        self._cursor = cursor
        self._lock = threading.Lock()
        self._done = False
        self.fired = False
        self._timer = threading.Timer(timeout_s, self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self) -> None:
        with self._lock:  # never interrupt a cursor that finished (and may be closed)
            if not self._done:
                self.fired = True
                self._cursor.interrupt()

    def stop(self) -> None:
        self._timer.cancel()
        with self._lock:
            self._done = True
