"""The read-only SQL surface over a run: DuckDB views over replay shards and trace spans.

One in-memory DuckDB connection gets a view per catalogued dataset and a ``spans`` view, then is
locked down: file access only under the run's ``replay`` and ``trace`` directories (or prefixes), no
changes to that configuration, no extension loaded or installed, and :meth:`ReplayReader.query`
accepts only a single SELECT statement (the lock alone would still allow ``COPY ... TO`` into the
replay directory and ``ATTACH``), checked by
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

A run on object storage (``s3://bucket/prefix``, or ``memory://name`` within this process) is read
through its store's fsspec filesystem, registered with the connection (DuckDB's ``httpfs`` extension
is never loaded). DuckDB applies ``allowed_directories`` to a registered filesystem as to local disk:
once external access is off, every path a query names, a glob pattern and each file it expands to,
must start with an allowed entry as a string (the URL with its scheme), and a path holding ``..`` or
``//`` is refused outright; so a query reaches only the run's ``<url>/replay/`` and ``<url>/trace/``,
not another prefix of the same bucket. The views use the filesystem's own spelling of the URL
(``memory:///name``), the one its glob results come back in.

A sweep root (``SWEEP.json``, see :mod:`engine.storage.sweep_layout`) reads as one run: each
dataset, and ``spans``, is a view over every cell's files with leading columns ``cell``,
``replication``, ``seed`` and one ``param_<path>`` per grid key, and a ``cells`` table holds one
row per cell (its statuses as of opening). File access is allowed only under the cells' ``replay``
and ``trace`` directories. The cell comes from each file's path, never from hive partitioning,
which DuckDB would also apply to any ``key=value`` directory above the run and let it override
a real column. Sweep roots are read from local disk only.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb
import fsspec
import pyarrow as pa

from engine.errors import QueryError, StorageError
from engine.storage.catalog import Catalog, DatasetSchema
from engine.storage.query_limits import QueryLimits
from engine.storage.run_layout import REPLAY_DIR, TRACE_DIR, RunLayout, RunLocation, run_store
from engine.storage.sql_guard import check_read_only_select
from engine.storage.store import FsspecStore, LocalStore, Store
from engine.storage.sweep_layout import (
    SWEEP_COLUMNS,
    SWEEP_FILE,
    TIER_COMPARISON_FILE,
    SweepManifest,
    cells_table,
    param_column,
    read_sweep_manifest,
)
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


def _has_files(store: Store, prefix: str, suffix: str) -> bool:
    """Whether the directory ``prefix`` of ``store`` holds a file named ``*<suffix>`` (hidden ones aside)."""
    files, _ = store.list_dir(prefix)
    return any(name.endswith(suffix) and not name.startswith(".") for name in files)


def _fsspec_root(store: FsspecStore) -> tuple[fsspec.AbstractFileSystem, str]:
    """The filesystem of ``store`` and its root URL as DuckDB sees the files (the filesystem's own spelling).

    Raises:
        StorageError: the store is a whole filesystem (``s3://``), not a run in it.
    """
    # FsspecStore keeps both private; its url is redacted for messages, while DuckDB needs the real one.
    fs, root = store._fs, store._root
    if fs.storage_options.get("use_listings_cache", True) is False:
        # The store lists afresh (other writers add keys); this reader reads committed shards, which never change in
        # a query: a filesystem of its own that keeps listings (dropped before each query) answers DuckDB's many size
        # and date questions from the glob's listing instead of one request per file and question.
        fs = type(fs)(**{**fs.storage_options, "use_listings_cache": True, "skip_instance_cache": True})
    if not root:
        raise StorageError(f"cannot open the replay of {store.url}: a run's URL names a bucket (and a prefix in it)")
    return fs, str(fs.unstrip_protocol(root)).rstrip("/")


class ReplayReader:
    """Query one run's replay datasets and trace spans with DuckDB.

    Use as a context manager, or call :meth:`close`. Queries may run from several threads.

    Args:
        run_dir: the run: its directory (holding ``replay/`` and ``trace/``), a sweep root (``SWEEP.json``), a
            URL of its store (``s3://bucket/prefix``; ``memory://name`` within this process), or the store itself
            (a :class:`~engine.storage.store.LocalStore` or :class:`~engine.storage.store.FsspecStore`).
        limits: memory, threads and time for each query (``EngineSettings.query_limits()``);
            the defaults (1GB, 2 threads, 30 s) suit callers that have no settings.

    Raises:
        StorageError: the catalog or sweep manifest is malformed, a sweep's dataset has a column
            the sweep views add, DuckDB could not set up the views, or a run on object storage cannot be
            reached, names a bucket that does not exist, or is a sweep root (sweeps are read from local disk
            only); the message names the run's path or URL. A bad URL raises :class:`~engine.errors.StoreUrlError`.
            A prefix that holds nothing yet opens as an empty run, as a missing local directory does.
    """

    def __init__(self, run_dir: RunLocation | Store, limits: QueryLimits | None = None) -> None:
        self.limits = limits if limits is not None else QueryLimits()
        self._lock = threading.Lock()
        self._con: duckdb.DuckDBPyConnection | None = None
        store = run_store(run_dir)
        local = store.local_root
        fs: fsspec.AbstractFileSystem | None = None
        #: The run's directory on local disk; None for a run on object storage.
        self.run_dir: Path | None = local.resolve() if local is not None else None
        if self.run_dir is not None:
            #: The run's store (of its directory, for a local run).
            self.store: Store = LocalStore(self.run_dir)
            self._root = str(self.run_dir)
            #: The run's path or URL, for messages (never with credentials).
            self.location = self._root
            #: The sweep manifest when ``run_dir`` is a sweep root, else None.
            self.sweep = read_sweep_manifest(self.run_dir)
        else:
            if not isinstance(store, FsspecStore):
                raise StorageError(f"cannot read {store.url} with DuckDB: it reads runs on local disk or an fsspec filesystem")
            self.store, self.location, self.sweep = store, store.url, None
            fs, self._root = _fsspec_root(store)
            self._check_remote_run()
        self._fs = fs  #: the filesystem DuckDB reads an object store through (its listings kept for one query)
        self._schemas = Catalog(self.store.child(REPLAY_DIR)).load() if self.sweep is None else _sweep_schemas(self.sweep)
        self._con = duckdb.connect(":memory:")
        try:
            if fs is not None:
                self._con.register_filesystem(fs)
            self._setup(self._con)
        except duckdb.Error as exc:
            self.close()
            raise StorageError(f"cannot open the replay of {self.location}: {exc}") from exc
        except StorageError:
            self.close()
            raise

    def _check_remote_run(self) -> None:
        """Refuse a run on object storage that cannot be listed, whose bucket does not exist, or is a sweep root.

        A prefix that holds nothing yet in a bucket that exists is an empty run, as a missing local directory is.
        """
        try:
            files, dirs = self.store.list_dir("")
        except StorageError as exc:
            raise StorageError(f"cannot open the replay of {self.location}: {exc}") from exc
        if not files and not dirs:
            assert isinstance(self.store, FsspecStore)
            fs, root = self.store._fs, self.store._root
            bucket = root.lstrip("/").partition("/")[0]
            if bucket and not root.startswith("/"):  # object stores name a bucket first (fsspec's memory: a path)
                try:
                    fs.invalidate_cache(bucket)
                    fs.info(bucket)
                except FileNotFoundError:
                    raise StorageError(f"cannot open the replay of {self.location}: its bucket {bucket!r} does not exist") from None
                except Exception as exc:  # the filesystem's own errors (botocore's, aiohttp's)
                    raise StorageError(f"cannot open the replay of {self.location}: {type(exc).__name__}: {exc}") from exc
        if SWEEP_FILE in files:
            raise StorageError(f"{self.location} is a sweep root: sweeps can be read from local disk only")

    def _setup(self, con: duckdb.DuckDBPyConnection) -> None:
        # No extension may load, not even while the views bind (an s3:// path would otherwise fetch httpfs).
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET autoload_known_extensions = false")
        readable = self._run_views(con) if self.sweep is None else self._sweep_views(con, self.sweep)
        # The trailing "/" matters: DuckDB compares strings, and ".../replay" would allow ".../replay_old/" too.
        allowed = ", ".join(_literal(f"{d}/") for d in readable)
        # Order matters (RUNTIME_NOTES): allow-list first, then cut external access, then lock.
        # An empty temp_directory keeps DuckDB from adding its spill directory to the allow-list
        # (and from spilling: a query over the memory limit fails instead of filling a disk).
        con.execute("SET temp_directory = ''")
        con.execute(f"SET memory_limit = {_literal(self.limits.memory_limit)}")
        con.execute(f"SET threads = {int(self.limits.threads)}")
        # Each view reads every shard's footer when it binds and when it is queried: keep them for the reader's life
        # (an object store answers each read in milliseconds, not microseconds).
        con.execute("SET parquet_metadata_cache = true")
        con.execute(f"SET allowed_directories = [{allowed}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")

    def _run_views(self, con: duckdb.DuckDBPyConnection) -> list[str]:
        replay, trace = f"{self._root}/{REPLAY_DIR}", f"{self._root}/{TRACE_DIR}"
        for name, schema in sorted(self._schemas.items()):
            if _has_files(self.store, f"{REPLAY_DIR}/{name}", ".parquet"):
                source = _source("replay", [f"{replay}/{name}/*.parquet"])
                con.execute(f"CREATE VIEW {_ident(name)} AS {_catalogued(schema, source)}")
            else:
                con.execute(_empty_view_sql(name, {c.name: _DUCKDB_TYPES[c.type] for c in schema.columns}))
        if _has_files(self.store, TRACE_DIR, ".jsonl"):
            con.execute(f"CREATE VIEW spans AS SELECT * FROM {_source('trace', [f'{trace}/*.jsonl'])}")
        else:
            con.execute(_empty_view_sql("spans", SPAN_COLUMNS))
        return [replay, trace]

    def _sweep_views(self, con: duckdb.DuckDBPyConnection, sweep: SweepManifest) -> list[str]:
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
            cells = [LocalStore(sweep.cell_dir(c.index)) for c in sweep.cells]
            prefix = TRACE_DIR if kind == "trace" else f"{REPLAY_DIR}/{name}"
            globs = [f"{cell.local_root}/{prefix}/*{suffix}" for cell in cells if _has_files(cell, prefix, suffix)]
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
        comparison = sweep.root / TIER_COMPARISON_FILE
        compared = comparison.is_file() and "tier_comparison" not in self._schemas
        if compared:
            con.execute(f"CREATE VIEW tier_comparison AS SELECT * FROM read_parquet({_literal(str(comparison))})")
        return [str(d) for c in sweep.cells for d in (RunLayout(sweep.cell_dir(c.index)).replay, RunLayout(sweep.cell_dir(c.index)).trace)] + \
            ([str(comparison.parent)] if compared else [])

    def register_views(self, con: duckdb.DuckDBPyConnection) -> None:
        """Create this run's views (a sweep's: with its ``cells`` table) in ``con``, a connection of the caller's.

        For trusted callers (``polis.Run.duckdb``), who may join their own data: ``con`` keeps its own settings and is
        not locked down. The reader's own connection, which serves untrusted SQL, is not touched.

        Raises:
            StorageError: a view could not be created (DuckDB's message, naming the run).
        """
        try:
            if self._fs is not None:
                con.register_filesystem(self._fs)
            if self.sweep is None:
                self._run_views(con)
            else:
                self._sweep_views(con, self.sweep)
        except duckdb.Error as exc:
            raise StorageError(f"cannot create the views of {self.location}: {exc}") from exc

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
        if self._fs is not None:
            self._fs.invalidate_cache()  # a shard committed since the last query is listed again
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
