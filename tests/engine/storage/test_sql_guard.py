"""The reader's SQL guard: functions the locked connection would still run are refused with a reason,
whatever the spelling, and the row cap stops a result without fetching the rest."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import QueryError
from engine.storage.catalog import Catalog, Column, DatasetSchema
from engine.storage.reader import ReplayReader
from engine.storage.replay import ReplayWriter, shard_name

NOTES = DatasetSchema(name="notes", kind="agent", columns=(Column(name="step", type="int64"), Column(name="query", type="string")))


@pytest.fixture
def reader(tmp_path: Path):
    replay = tmp_path / "replay"
    Catalog(replay).register(NOTES)
    ReplayWriter(tmp_path).write_shard(NOTES, shard_name(1, 0), [{"step": i, "query": f"q{i}"} for i in range(5)])
    with ReplayReader(tmp_path) as opened:
        yield opened


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT * FROM query('SELECT 1')", r"query\(\) is not allowed here: it runs SQL that this check never sees"),
        ("SELECT * FROM main.QUERY('SELECT 1')", r"query\(\) is not allowed"),
        ("SELECT * FROM \"query_table\"('notes')", r"query_table\(\) is not allowed"),
        ("SELECT * FROM json_execute_serialized_sql(json_serialize_sql('SELECT 1'))", "json_execute_serialized_sql"),
        ("SELECT getenv('HOME')", r"getenv\(\) is not allowed here: it reads the server's environment"),
        ("SELECT /* hidden */ GetEnv('HOME')", r"getenv\(\) is not allowed"),
        ("SELECT * FROM duckdb_settings()", r"duckdb_settings\(\) is not allowed here: it shows the server's configuration"),
        ("SELECT current_setting('allowed_directories')", r"current_setting\(\) is not allowed"),
        ("SELECT * FROM pg_catalog.pg_settings", "the table pg_settings is not allowed"),
        ("SELECT * FROM pragma_version()", "PRAGMA functions"),
        ("SELECT * FROM notes WHERE step IN (SELECT 1 FROM duckdb_secrets())", r"duckdb_secrets\(\)"),
        ("WITH s AS (SELECT * FROM duckdb_extensions()) SELECT * FROM s", r"duckdb_extensions\(\)"),
        ("SELECT list_transform([1], x -> current_setting('threads'))", r"current_setting\(\)"),
        ("SELECT * FROM add_grammar_extension('x')", "changes how SQL is parsed"),
        ("SELECT * FROM enable_logging()", "logs"),
        ("SELECT * FROM checkpoint()", "storage"),
        ("FROM notes PIVOT (first(current_setting('threads')) FOR step IN (1))", r"current_setting\(\)"),
        ("SELECT * FROM (PIVOT notes ON step USING first(current_setting('threads')))", "only SELECT statements"),
    ],
)
def test_functions_that_reach_past_the_lock_are_refused_with_a_reason(reader: ReplayReader, sql: str, reason: str) -> None:
    with pytest.raises(QueryError, match=reason):
        reader.query(sql)


@pytest.mark.parametrize(
    ("sql", "reason"),
    [
        ("SELECT 1 -- a comment\n; DROP VIEW notes", "exactly one SQL statement, got 2"),
        ("SELECT 1 /* ; */ ; /* x */ DROP VIEW notes", "exactly one SQL statement, got 2"),
        ("INSTALL httpfs", "only SELECT statements are allowed"),
        ("LOAD httpfs", "only SELECT statements are allowed, got LOAD"),
        ("CALL pragma_version()", "got CALL"),
        ("EXPORT DATABASE '/tmp/polis-export'", "got EXPORT"),
        ("DROP VIEW notes", "got DROP"),
        ("SELECT * FROM read_text('/etc/hostname')", "Permission Error"),
    ],
)
def test_statements_the_lock_alone_would_leave_are_refused(reader: ReplayReader, sql: str, reason: str) -> None:
    with pytest.raises(QueryError, match=reason):
        reader.query(sql)
    assert reader.count("notes") == 5  # nothing was dropped


def test_a_column_named_like_a_denied_function_still_reads(reader: ReplayReader) -> None:
    assert reader.query('SELECT "query" FROM notes ORDER BY step LIMIT 1').to_pylist() == [{"query": "q0"}]
    assert reader.query("SELECT query AS q FROM notes WHERE step = 4").to_pylist() == [{"q": "q4"}]


def test_introspection_that_shows_no_server_paths_is_allowed(reader: ReplayReader) -> None:
    assert "notes" in reader.query("SHOW TABLES").column("name").to_pylist()
    assert reader.query("DESCRIBE notes").num_rows == 2
    assert reader.query("SELECT count(*) AS n FROM information_schema.tables").column("n")[0].as_py() >= 2


def test_query_capped_cuts_the_result_and_says_so(reader: ReplayReader) -> None:
    capped = reader.query_capped("SELECT * FROM range(100000) t(i)", 10)
    assert capped.truncated and capped.table.column("i").to_pylist() == list(range(10))
    whole = reader.query_capped("SELECT step FROM notes", 5)
    assert not whole.truncated and whole.table.num_rows == 5
    assert reader.query_capped("SELECT step FROM notes", 0).truncated


def test_query_capped_stops_an_endless_result_at_the_cap_not_the_time_limit(reader: ReplayReader) -> None:
    capped = reader.query_capped("SELECT a.range AS x FROM range(1000000) a, range(1000000) b", 3)
    assert capped.truncated and capped.table.num_rows == 3
