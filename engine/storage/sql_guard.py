"""The static check on SQL the read-only surface runs: one SELECT, and none of the functions that reach past it.

:class:`~engine.storage.reader.ReplayReader` locks its DuckDB connection (file access only under
the run, no extensions, configuration locked); this check refuses what that lock still lets through:

- more or fewer than one statement, or one that is not a SELECT (``COPY``, ``ATTACH``, ``PRAGMA``,
  ``SET``, ``INSTALL``, ``LOAD``, ``CALL``, ``EXPORT``, DDL and DML). DuckDB's own parser splits the
  text, so a second statement hidden after a comment counts as a second statement;
- functions that run SQL text the check never saw (``query``, ``query_table``,
  ``json_execute_serialized_sql``), change the parser (``add_grammar_extension``), write logs or
  checkpoints, or show the server's configuration: its settings (``duckdb_settings``,
  ``current_setting``, ``pg_catalog.pg_settings`` and every ``pragma_*`` function, which name the
  server's paths), its environment (``getenv``), secrets and extensions; and the catalog entries that show the
  views' definitions (``duckdb_views``, ``information_schema.views``, ``sqlite_master``), which name the runs' files.

Function and table names come from DuckDB's parse tree (``json_serialize_sql``), so quoting,
schema prefixes, case and comments do not hide them. A SELECT that DuckDB cannot serialize is
refused rather than let through unchecked (the statement forms that cannot be, such as a bare
``PIVOT``, are not of type SELECT and are refused before).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import duckdb

from engine.errors import QueryError

__all__ = ["DENIED_FUNCTIONS", "DENIED_PREFIXES", "DENIED_TABLES", "check_read_only_select"]

#: Functions a query may not call, with why (keys are lower case).
DENIED_FUNCTIONS: dict[str, str] = {
    **dict.fromkeys(("query", "query_table", "json_execute_serialized_sql"), "it runs SQL that this check never sees"),
    **dict.fromkeys(("add_grammar_extension", "remove_grammar_extension", "duckdb_grammar_extensions"),
                    "it changes how SQL is parsed"),
    **dict.fromkeys(("getenv",), "it reads the server's environment"),
    **dict.fromkeys(("current_setting", "duckdb_settings", "duckdb_profiling_settings", "current_query"),
                    "it shows the server's configuration"),
    **dict.fromkeys(("duckdb_secrets", "duckdb_secret_types", "duckdb_secret_type_parameters", "which_secret"),
                    "it concerns the server's secrets"),
    **dict.fromkeys(("duckdb_extensions", "duckdb_extension_repositories"), "it concerns the server's extensions"),
    **dict.fromkeys(("enable_logging", "disable_logging", "truncate_duckdb_logs", "duckdb_logs", "duckdb_logs_parsed",
                     "duckdb_log_contexts", "write_log"), "it reads or changes the server's logs"),
    **dict.fromkeys(("checkpoint", "force_checkpoint", "duckdb_temporary_files"), "it concerns the server's storage"),
    **dict.fromkeys(("duckdb_views", "duckdb_databases", "duckdb_dependencies"),
                    "it shows how the datasets' views are defined, which names the server's paths"),
}
#: Name prefixes of functions a query may not call (``pragma_version()`` is ``PRAGMA version`` in disguise).
DENIED_PREFIXES: dict[str, str] = {"pragma_": "PRAGMA functions show the server's configuration"}
#: Tables and views a query may not read (lower case, unqualified).
DENIED_TABLES: dict[str, str] = {
    "pg_settings": "it shows the server's configuration",
    **dict.fromkeys(("views", "sqlite_master", "sqlite_schema", "sqlite_temp_master", "pg_views"),
                    "it shows how the datasets' views are defined, which names the server's paths"),
}


def check_read_only_select(sql: str, con: duckdb.DuckDBPyConnection) -> None:
    """Refuse ``sql`` unless it is exactly one SELECT that calls no denied function.

    Args:
        sql: the query text.
        con: a DuckDB connection (or cursor) to parse with; nothing of ``sql`` is executed on it.

    Raises:
        QueryError: the reason it is refused (the statement kind, or the function and why).
    """
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(str(exc)) from exc
    if len(statements) != 1:
        raise QueryError(f"expected exactly one SQL statement, got {len(statements)}")
    kind = statements[0].type
    if kind != duckdb.StatementType.SELECT:
        raise QueryError(f"only SELECT statements are allowed, got {kind.name}")
    functions, tables = _names_in_tree(_parse_tree(sql, con))
    for name in functions:
        reason = DENIED_FUNCTIONS.get(name) or next((r for p, r in DENIED_PREFIXES.items() if name.startswith(p)), None)
        if reason is not None:
            raise QueryError(f"the function {name}() is not allowed here: {reason}")
    for name in tables:
        if name in DENIED_TABLES:
            raise QueryError(f"the table {name} is not allowed here: {DENIED_TABLES[name]}")


def _parse_tree(sql: str, con: duckdb.DuckDBPyConnection) -> dict[str, Any]:
    """DuckDB's parse tree of ``sql`` as JSON data."""
    try:
        rows = con.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()
    except duckdb.Error as exc:
        raise QueryError(str(exc)) from exc
    tree: dict[str, Any] = json.loads(rows[0][0]) if rows else {"error": True}
    if tree.get("error"):
        raise QueryError(f"this SELECT cannot be checked, so it is refused: {tree.get('error_message', 'no parse tree')}")
    return tree


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _names_in_tree(tree: dict[str, Any]) -> tuple[set[str], set[str]]:
    functions, tables = set(), set()
    for node in _walk(tree):
        if isinstance(node.get("function_name"), str):
            functions.add(node["function_name"].lower())
        if node.get("type") == "BASE_TABLE" and isinstance(node.get("table_name"), str):
            tables.add(node["table_name"].lower())
    return functions, tables
