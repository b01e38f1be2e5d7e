"""A persona table (Parquet, CSV or JSON Lines) read into rows whose values can be profile fields.

One row makes one agent, its columns the agent's profile fields. A profile value is a string, a
finite number, a boolean, or empty (null, an empty CSV cell), which leaves the field out of that
agent's profile. Anything else (a list, an object, NaN, a timestamp, bytes) is refused with its
row and column, so that no agent gets a value the file does not hold; cast it in the file.

- **Parquet** (pyarrow): the file's own column types.
- **CSV** (pyarrow.csv, a header row): every cell is read as text; a column whose every value is
  an integer without leading zeros becomes integers, one of decimals becomes floats, and one of
  ``true``/``false`` becomes booleans. Everything else stays text (``007``, dates), as written.
- **JSON Lines** (one object per line, read by hand): the objects' own values; blank lines are
  skipped.

Rows are numbered from 1, the header not counted; in JSON Lines the row number is the line number.
Bounds: the file is at most ``MAX_INPUT_BYTES`` (the input files' limit), its table at most
``MAX_POPULATION_ROWS`` rows and ``MAX_POPULATION_CHARS`` bytes decoded. A Parquet file's footer and its
dictionaries are checked against them before any column is decoded. The file is parsed in a bounded child
process (:mod:`engine.population.bounded_read`): a file that crashes its parser, or needs more memory, time or
output than :data:`TABLE_LIMITS`, is refused like any other, naming the file.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.errors import PopulationFileError
from engine.population.bounded_read import DataFile, ReadLimits, decoded_bytes, read_bounded, read_parquet_within
from engine.population.members import MAX_POPULATION_CHARS, MAX_POPULATION_ROWS

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["TABLE_LIMITS", "TABLE_SUFFIXES", "RowProblem", "first_row_problem", "read_table"]

#: The file name endings a population may read, lower-cased.
TABLE_SUFFIXES = (".parquet", ".csv", ".jsonl")
#: What the process reading one table may use: its rows as JSON are answered, at most twice the decoded bound.
TABLE_LIMITS = ReadLimits(memory_mb=1024, output_bytes=2 * MAX_POPULATION_CHARS)
#: The modules a table's reading process imports before its limits apply.
ARROW_MODULES = ("pyarrow", "pyarrow.compute", "pyarrow.csv", "pyarrow.parquet")
_BATCH = 10_000  #: rows a frame of the reading process's answer

_INTEGER = r"^[+-]?(0|[1-9][0-9]*)$"
_DECIMAL = r"^[+-]?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?$"
_PROFILE_VALUE = "a string, a finite number, a boolean or empty"
_PLAIN = frozenset({str, int, bool, type(None)})


@dataclass(frozen=True)
class RowProblem:
    """Why one row cannot make an agent."""

    row: int  #: 1-based data row
    column: str | None  #: the column at fault, if one is
    message: str  #: what is wrong, led by the row (and column)


def _value_problem(value: Any) -> str | None:
    if value is None or isinstance(value, str | bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value!r} is not a finite number"
    kind = "an object" if isinstance(value, Mapping) else "a list" if isinstance(value, list) else f"a {type(value).__name__}"
    return f"{kind} cannot be a profile field ({_PROFILE_VALUE})"


def first_row_problem(rows: Sequence[Any], columns: Sequence[str] | None = None, first_row: int = 1) -> RowProblem | None:
    """The first row that cannot make an agent: not a mapping, a key that is no column name, a bad value, or a listed column missing.

    Args:
        rows: the rows, in order.
        columns: columns every row must have; None: none required.
        first_row: the number of ``rows[0]``.
    """
    for number, row in enumerate(rows, first_row):
        if not isinstance(row, Mapping):
            return RowProblem(number, None, f"row {number} is not an object of column values")
        for key, value in row.items():
            if type(value) in _PLAIN and type(key) is str and key:  # the common case, checked fast
                continue
            if not isinstance(key, str) or not key:
                return RowProblem(number, None, f"row {number} has a column without a name ({key!r})")
            if (problem := _value_problem(value)) is not None:
                return RowProblem(number, key, f"row {number}, column {key!r}: {problem}")
        for column in columns or ():
            if column not in row:
                return RowProblem(number, column, f"row {number} has no column {column!r}")
    return None


def _missing_columns(names: Sequence[str], columns: Sequence[str] | None, fail: Callable[..., PopulationFileError]) -> None:
    if duplicated := sorted({n for n in names if names.count(n) > 1}):
        raise fail(f"has the column {duplicated[0]!r} twice", column=duplicated[0])
    if unnamed := [i + 1 for i, n in enumerate(names) if not n]:
        raise fail(f"column {unnamed[0]} has no name")
    for column in columns or ():
        if column not in names:
            raise fail(f"has no column {column!r}; its columns: {', '.join(names)}", column=column)


def _check_arrow(table: pa.Table, fail: Callable[..., PopulationFileError]) -> pa.Table:
    """``table`` with dictionary columns decoded, after checking every column holds profile values."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if table.num_rows > MAX_POPULATION_ROWS:
        raise fail(f"has {table.num_rows} rows; a population has at most {MAX_POPULATION_ROWS}")
    if (size := decoded_bytes(table)) > MAX_POPULATION_CHARS:  # counted before any dictionary is decoded
        raise fail(f"decodes to {size} bytes; at most {MAX_POPULATION_CHARS} are allowed")
    for i, name in enumerate(table.column_names):
        column = table.column(i)
        kind = column.type
        if pa.types.is_dictionary(kind):
            column, kind = pc.cast(column, kind.value_type), kind.value_type
            table = table.set_column(i, name, column)
        if pa.types.is_floating(kind):
            bad = pc.index(pc.fill_null(pc.or_(pc.is_nan(column), pc.is_inf(column)), False), True).as_py()
            if bad >= 0:
                raise fail(f"row {bad + 1}, column {name!r}: {column[bad].as_py()!r} is not a finite number", row=bad + 1, column=name)
        elif not (pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_integer(kind)
                  or pa.types.is_boolean(kind) or pa.types.is_null(kind)):
            bad = pc.index(pc.is_valid(column), True).as_py()
            if bad >= 0:  # an all-null column holds no value, so it makes no field
                raise fail(f"row {bad + 1}, column {name!r}: a {kind} value cannot be a profile field ({_PROFILE_VALUE}); "
                           "cast the column in the file", row=bad + 1, column=name)
    return table


def _read_parquet(path: Path, columns: Sequence[str] | None, fail: Callable[..., PopulationFileError]) -> pa.Table:
    import pyarrow.parquet as pq

    names = pq.read_schema(path).names
    _missing_columns(names, columns, fail)
    return read_parquet_within(path, list(columns) if columns is not None else names, max_rows=MAX_POPULATION_ROWS,
                               max_bytes=MAX_POPULATION_CHARS, fail=fail)


def _typed(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A text column as integers, floats or booleans when every value is one (see the module docstring)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    values = column.drop_null()
    if len(values) == 0:
        return column
    if pc.all(pc.match_substring_regex(values, _INTEGER)).as_py():
        try:
            return pc.cast(column, pa.int64())
        except pa.ArrowInvalid:  # past int64: kept as written
            return column
    if pc.all(pc.match_substring_regex(values, _DECIMAL)).as_py():
        return pc.cast(column, pa.float64())
    if pc.all(pc.is_in(pc.utf8_lower(values), pa.array(["true", "false"]))).as_py():
        return pc.equal(pc.utf8_lower(column), "true")
    return column


def _read_csv(path: Path, columns: Sequence[str] | None, fail: Callable[..., PopulationFileError]) -> pa.Table:
    import pyarrow as pa
    import pyarrow.csv as pcsv

    bad_rows: list[str] = []

    def invalid(row: Any) -> str:
        bad_rows.append(row.text)
        return "error"

    parse = pcsv.ParseOptions(invalid_row_handler=invalid)
    try:
        with pcsv.open_csv(path, parse_options=parse) as reader:  # the header, to read every column as text
            names = reader.schema.names
        _missing_columns(names, columns, fail)
        table = pcsv.read_csv(path, parse_options=parse, convert_options=pcsv.ConvertOptions(
            column_types={name: pa.string() for name in names}, include_columns=list(columns or names),
            null_values=[""], strings_can_be_null=True, quoted_strings_can_be_null=True,
        ))
    except pa.ArrowInvalid as error:
        if bad_rows:  # pyarrow does not number the row; its text finds it
            lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
            row = next((i for i, line in enumerate(lines) if i and line == bad_rows[0]), None)
            raise fail(f"{f'row {row}' if row else 'a row'} does not parse: {error}", row=row) from None
        raise
    for i, name in enumerate(table.column_names):
        table = table.set_column(i, name, _typed(table.column(i)))
    return table


def _read_jsonl(path: Path, columns: Sequence[str] | None, fail: Callable[..., PopulationFileError]) -> list[dict[str, Any]]:
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise fail(f"is not UTF-8 text: {error}") from None
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        if len(rows) >= MAX_POPULATION_ROWS:
            raise fail(f"has more than {MAX_POPULATION_ROWS} rows, the most a population has")
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise fail(f"row {number} is not JSON: {error}", row=number) from None
        except RecursionError:
            raise fail(f"row {number} is nested too deeply to read", row=number) from None
        if (problem := first_row_problem([row], columns, number)) is not None:
            raise fail(problem.message, row=problem.row, column=problem.column)
        rows.append({key: row[key] for key in (columns or row) if row[key] is not None})
    return rows


def _failing(file: DataFile) -> Callable[..., PopulationFileError]:
    def fail(message: str, *, row: int | None = None, column: str | None = None) -> PopulationFileError:
        return PopulationFileError(f"{file.label!r} {message}", file.field, row=row, column=column)

    return fail


def _table_rows(file: DataFile, columns: Sequence[str] | None) -> Iterator[list[dict[str, Any]]]:
    """The table's rows in batches, nulls dropped (run in the reading process: see :func:`read_table`)."""
    import pyarrow as pa

    fail = _failing(file)
    suffix = file.path.suffix.lower()
    try:
        if suffix == ".jsonl":
            rows = _read_jsonl(file.path, columns, fail)
            for start in range(0, len(rows), _BATCH):
                yield rows[start : start + _BATCH]
            return
        reader = _read_parquet if suffix == ".parquet" else _read_csv
        table = _check_arrow(reader(file.path, columns, fail), fail)
    except (pa.ArrowException, OSError) as error:
        raise fail(f"cannot be read as {suffix[1:].upper()}: {error}") from None
    for batch in table.to_batches(max_chunksize=_BATCH):
        yield [{key: value for key, value in row.items() if value is not None} for row in batch.to_pylist()]


def read_table(path: Path, *, field: str, label: str, columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The rows of the table at ``path``, each a mapping of column to profile value (nulls dropped).

    The file is parsed in a bounded child process (:data:`TABLE_LIMITS`), so a file that crashes its parser or
    needs more than the limits is refused as any other, and the caller lives on.

    Args:
        path: the file to read (already located: relative to the spec's folder, or under an allowed root).
        field: the spec field naming it, e.g. ``population.0.from`` (the error's path).
        label: the file as the spec names it, for messages.
        columns: read only these columns, each of which the file must have; None: every column.

    Raises:
        PopulationFileError: a missing or oversized file, an unknown extension, a file that does
            not parse or that its reading process cannot read within its limits, a listed column the
            file lacks, or a value that cannot be a profile field; ``row`` and ``column`` say where,
            when one row or column is at fault. The message names the file by ``label``, never by ``path``.
    """
    from engine.env.input_files import MAX_INPUT_BYTES

    file = DataFile(path, field, label)
    fail = _failing(file)
    suffix = path.suffix.lower()
    if suffix not in TABLE_SUFFIXES:
        raise fail(f"is not a table Polis reads: name a {', '.join(TABLE_SUFFIXES)} file")
    try:
        size = path.stat().st_size
    except OSError as error:
        raise fail(f"cannot be read: {error.strerror or error}") from None
    if not path.is_file():
        raise fail("is not a file")
    if size > MAX_INPUT_BYTES:
        raise fail(f"is {size} bytes; population tables are at most {MAX_INPUT_BYTES}")
    rows: list[dict[str, Any]] = []
    for batch in read_bounded(_table_rows, file, list(columns) if columns is not None else None, error=PopulationFileError,
                              limits=TABLE_LIMITS, preload=ARROW_MODULES):
        if not isinstance(batch, list) or not all(isinstance(row, dict) for row in batch):
            raise fail("cannot be read: its reading process answered something other than rows")
        rows.extend(batch)
    if not rows:
        raise fail("has no rows")
    return rows
