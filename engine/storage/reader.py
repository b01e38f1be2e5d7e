"""The read-only SQL surface over a run: DuckDB views over replay shards and trace spans.

One in-memory DuckDB connection gets a view per catalogued dataset and a ``spans`` view, then is
locked down: file access only under the run's ``replay`` and ``trace`` directories, no changes to
that configuration, and :meth:`ReplayReader.query` accepts only a single SELECT statement (the
lock alone would still allow ``COPY ... TO`` into the replay directory and ``ATTACH``).

Which datasets, and whether the trace, have files is decided when the reader opens (reopen to see a
first shard); shards added later to a dataset that already had one are visible to later queries,
since each view globs at query time.
"""

from __future__ import annotations

import threading
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb
import pyarrow as pa

from engine.errors import QueryError, StorageError
from engine.storage.catalog import Catalog, DatasetSchema
from engine.storage.text_table import format_table

__all__ = ["SPAN_COLUMNS", "ReplayReader", "format_table"]

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


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _empty_view_sql(name: str, columns: dict[str, str]) -> str:
    cols = ", ".join(f"CAST(NULL AS {t}) AS {_ident(c)}" for c, t in columns.items())
    return f"CREATE VIEW {_ident(name)} AS SELECT {cols} WHERE false"


def _has_files(directory: Path, suffix: str) -> bool:
    return directory.is_dir() and any(
        p.name.endswith(suffix) and not p.name.startswith(".") for p in directory.iterdir()
    )


class ReplayReader:
    """Query one run's replay datasets and trace spans with DuckDB.

    Use as a context manager, or call :meth:`close`. Queries may run from several threads.

    Args:
        run_dir: the run directory holding ``replay/`` and ``trace/``.

    Raises:
        StorageError: the catalog is malformed or DuckDB could not set up the views.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir).resolve()
        self.replay_dir = self.run_dir / "replay"
        self.trace_dir = self.run_dir / "trace"
        self._schemas = Catalog(self.replay_dir).load()
        self._lock = threading.Lock()
        self._con: duckdb.DuckDBPyConnection | None = duckdb.connect(":memory:")
        try:
            self._setup(self._con)
        except duckdb.Error as exc:
            self.close()
            raise StorageError(f"cannot open the replay of {self.run_dir}: {exc}") from exc

    def _setup(self, con: duckdb.DuckDBPyConnection) -> None:
        for name, schema in sorted(self._schemas.items()):
            directory = self.replay_dir / name
            if _has_files(directory, ".parquet"):
                glob = _literal(str(directory / "*.parquet"))
                con.execute(f"CREATE VIEW {_ident(name)} AS SELECT * FROM read_parquet({glob}, union_by_name=true)")
            else:
                con.execute(_empty_view_sql(name, {c.name: _DUCKDB_TYPES[c.type] for c in schema.columns}))
        if _has_files(self.trace_dir, ".jsonl"):
            glob = _literal(str(self.trace_dir / "*.jsonl"))
            columns = "{" + ", ".join(f"{_literal(c)}: {_literal(t)}" for c, t in SPAN_COLUMNS.items()) + "}"
            con.execute(
                f"CREATE VIEW spans AS SELECT * FROM read_json({glob}, format='newline_delimited', columns={columns})"
            )
        else:
            con.execute(_empty_view_sql("spans", SPAN_COLUMNS))
        allowed = ", ".join(_literal(f"{d}/") for d in (self.replay_dir, self.trace_dir))
        # Order matters (RUNTIME_NOTES): allow-list first, then cut external access, then lock.
        # An empty temp_directory keeps DuckDB from adding its spill directory to the allow-list.
        con.execute("SET temp_directory = ''")
        con.execute(f"SET allowed_directories = [{allowed}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET autoinstall_known_extensions = false")
        con.execute("SET autoload_known_extensions = false")
        con.execute("SET lock_configuration = true")

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
            QueryError: not exactly one statement, not a SELECT, the reader is closed, or DuckDB
                rejected the query (DuckDB's message is kept).
        """
        _check_single_select(sql)
        with self._lock:
            if self._con is None:
                raise QueryError("the replay reader is closed")
            cursor = self._con.cursor()
        try:
            return cursor.sql(sql, params=params).to_arrow_table()
        except duckdb.Error as exc:
            raise QueryError(str(exc)) from exc
        finally:
            cursor.close()


def _check_single_select(sql: str) -> None:
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(str(exc)) from exc
    if len(statements) != 1:
        raise QueryError(f"expected exactly one SQL statement, got {len(statements)}")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise QueryError(f"only SELECT statements are allowed, got {kind.name}")
