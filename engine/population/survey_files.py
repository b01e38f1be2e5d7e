"""Reading a survey population's files: the respondents' table and its codebook, into the spec's data.

The table is any file :mod:`engine.population.table` reads, or a Stata ``.dta`` or SPSS ``.sav``
file read by pyreadstat (the ``survey`` extra) with its own metadata: a column's label is its
question, and its value labels are its labels, wherever the codebook gives none. Codes a ``.dta`` or
``.sav`` file marks as missing (Stata's ``.a``-``.z``, SPSS's user-missing values) are read as no answer.

The codebook is a YAML file (named relative to the spec, like the table) or a mapping in the spec.
Both are written into the spec's data, so a stored spec carries its rows and codebook, and a resumed,
swept or forked run reads no file.

Every file is parsed in a bounded child process (:mod:`engine.population.bounded_read`): a ``.sav`` that
crashes pyreadstat, or a codebook whose aliases expand without end, is refused naming the file.
"""

from __future__ import annotations

import base64
import datetime
import math
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from engine.errors import PopulationFileError
from engine.population.bounded_read import DataFile, ReadLimits, read_bounded
from engine.population.members import MAX_POPULATION_ROWS
from engine.population.table import TABLE_LIMITS, first_row_problem, read_table

__all__ = ["LABELLED_SUFFIXES", "read_survey"]

#: Files read with their labels (pyreadstat).
LABELLED_SUFFIXES = (".dta", ".sav")
#: What the process reading a codebook may use: a codebook is a page of YAML, not a table.
CODEBOOK_LIMITS = ReadLimits(memory_mb=256, cpu_s=20, wall_s=60.0, output_bytes=16 * 2**20)
_BATCH = 10_000  #: rows a frame of the reading process's answer


_CODEBOOK_VALUES = 1_000_000  #: the most values a codebook may hold, aliases expanded


def _tagged(value: Any, budget: list[int]) -> Any:
    """``value`` (YAML data) as JSON that keeps what JSON cannot hold: a key that is no string, a date, a NaN."""
    budget[0] -= 1
    if budget[0] < 0:
        raise ValueError(f"it expands to more than {_CODEBOOK_VALUES} values")
    if isinstance(value, Mapping):
        return {"map": [[_tagged(key, budget), _tagged(item, budget)] for key, item in value.items()]}
    if isinstance(value, list | tuple | set | frozenset):
        return {"set" if isinstance(value, set | frozenset) else "list": [_tagged(item, budget) for item in value]}
    if isinstance(value, float) and not math.isfinite(value):
        return {"float": repr(value)}
    if isinstance(value, datetime.datetime | datetime.date):
        return {type(value).__name__: value.isoformat()}
    if isinstance(value, bytes):
        return {"bytes": base64.b64encode(value).decode()}
    return value


def _untagged(value: Any) -> Any:
    """The YAML data :func:`_tagged` made ``value`` of."""
    if not isinstance(value, dict):
        return value
    if len(value) != 1:
        raise ValueError("not a tagged value")
    ((tag, body),) = value.items()
    if tag == "map":
        return {_untagged(key): _untagged(item) for key, item in body}
    if tag in ("list", "set"):
        items = [_untagged(item) for item in body]
        return items if tag == "list" else set(items)
    if tag == "float":
        return float(body)
    if tag in ("date", "datetime"):
        return getattr(datetime, tag).fromisoformat(body)
    if tag == "bytes":
        return base64.b64decode(body)
    raise ValueError(f"an unknown tag {tag!r}")


def _codebook_yaml(file: DataFile) -> Iterator[Any]:
    """The codebook file's YAML, tagged (run in the reading process: see :func:`_codebook_data`)."""
    import yaml

    try:
        data = yaml.safe_load(file.path.read_text(encoding="utf-8"))
    except OSError as error:
        raise PopulationFileError(f"{file.label!r} cannot be read: {error.strerror or error}", file.field) from None
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise PopulationFileError(f"{file.label!r} is not YAML: {error}", file.field) from None
    except RecursionError:
        raise PopulationFileError(f"{file.label!r} is nested too deeply to read", file.field) from None
    if not isinstance(data, Mapping):
        raise PopulationFileError(f"{file.label!r} is not a codebook: it holds no mapping with 'columns'", file.field)
    try:
        yield _tagged(data, [_CODEBOOK_VALUES])
    except (ValueError, RecursionError) as error:
        reason = "it is nested too deeply" if isinstance(error, RecursionError) else str(error)
        raise PopulationFileError(f"{file.label!r} is not a codebook Polis reads: {reason}", file.field) from None


def _codebook_data(value: Any, locate: Callable[[str, str], Path], field: str) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    if not isinstance(value, str) or not value:
        raise PopulationFileError("must name a YAML codebook or be one (a mapping with 'columns')", field)
    path = locate(field, value)
    from engine.env.input_files import MAX_INPUT_BYTES

    _check_size(DataFile(path, field, value), MAX_INPUT_BYTES)
    (tagged,) = read_bounded(_codebook_yaml, DataFile(path, field, value), error=PopulationFileError,
                             limits=CODEBOOK_LIMITS, preload=("yaml",))
    try:
        data = _untagged(tagged)
    except (ValueError, TypeError, RecursionError):
        raise PopulationFileError(f"{value!r} cannot be read: its reading process answered something other than YAML",
                                  field) from None
    if not isinstance(data, Mapping):
        raise PopulationFileError(f"{value!r} is not a codebook: it holds no mapping with 'columns'", field)
    return dict(data)


def _check_size(file: DataFile, limit: int) -> None:
    try:
        size = file.path.stat().st_size
    except OSError as error:
        raise PopulationFileError(f"{file.label!r} cannot be read: {error.strerror or error}", file.field) from None
    if not file.path.is_file():
        raise PopulationFileError(f"{file.label!r} is not a file", file.field)
    if size > limit:
        raise PopulationFileError(f"{file.label!r} is {size} bytes; a survey's files are at most {limit}", file.field)


def _listed_columns(codebook: Mapping[str, Any], field: str) -> list[str]:
    columns = codebook.get("columns")
    if not isinstance(columns, Mapping) or not columns or not all(isinstance(c, str) and c for c in columns):
        raise PopulationFileError("needs 'columns': a mapping of each column the survey uses to its role", f"{field}.columns")
    retests = [spec.get("retest_column") for spec in columns.values() if isinstance(spec, Mapping)]
    return [*columns, *(r for r in retests if isinstance(r, str) and r and r not in columns)]


def _in_code_order(labels: Mapping[Any, str]) -> list[list[Any]]:
    """Value labels as ``[[code, label], ...]``, by number where every code is one, else by text."""
    numeric = all(isinstance(code, int | float) and not isinstance(code, bool) for code in labels)
    return [[code, text] for code, text in sorted(labels.items(), key=lambda item: item[0] if numeric else str(item[0]))]


def _labelled(file: DataFile, columns: list[str]) -> Iterator[Any]:
    """What the metadata of a ``.dta`` or ``.sav`` file says of each column, then its rows (codes, not labels) in
    batches (run in the reading process: see :func:`_read_labelled`)."""
    def fail(message: str, *, row: int | None = None, column: str | None = None) -> PopulationFileError:
        return PopulationFileError(f"{file.label!r} {message}", file.field, row=row, column=column)

    try:
        import pyreadstat
    except ImportError:
        raise PopulationFileError(f"{file.label!r}: reading .dta and .sav files needs pyreadstat "
                                  "(pip install 'polis[survey]')", file.field) from None
    read = pyreadstat.read_dta if file.path.suffix.lower() == ".dta" else pyreadstat.read_sav
    try:
        _, meta = read(str(file.path), metadataonly=True)
        names = list(meta.column_names)
        if missing := [c for c in columns if c not in names]:
            raise fail(f"has no column {missing[0]!r}; its columns: {', '.join(map(str, names))}", column=missing[0])
        if isinstance(meta.number_rows, int) and meta.number_rows > MAX_POPULATION_ROWS:
            raise fail(f"has {meta.number_rows} rows; a population has at most {MAX_POPULATION_ROWS}")
        frame, meta = read(str(file.path), usecols=columns, apply_value_formats=False)
    except (pyreadstat.ReadstatError, pyreadstat.PyreadstatError, UnicodeError, ValueError) as error:
        raise fail(f"cannot be read: {error}") from None
    if len(frame) > MAX_POPULATION_ROWS:
        raise fail(f"has {len(frame)} rows; a population has at most {MAX_POPULATION_ROWS}")
    described: dict[str, dict[str, Any]] = {}
    for column in columns:
        about: dict[str, Any] = {}
        if question := (meta.column_names_to_labels or {}).get(column):
            about["question"] = str(question)
        if labels := (meta.variable_value_labels or {}).get(column):
            about["labels"] = _in_code_order(labels)
        described[column] = about
    yield described
    records = frame.to_dict("records")
    del frame
    for start in range(0, len(records), _BATCH):
        batch = [{key: value for key, value in row.items() if not (value is None or (isinstance(value, float) and math.isnan(value)))}
                 for row in records[start : start + _BATCH]]
        if (problem := first_row_problem(batch, first_row=start + 1)) is not None:
            raise fail(f"{problem.message}; cast the column in the file", row=problem.row, column=problem.column)
        yield batch


def _read_labelled(path: Path, columns: list[str], field: str, label: str) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The rows of a ``.dta`` or ``.sav`` file (codes, not labels) and what its metadata says of each column."""
    from engine.env.input_files import MAX_INPUT_BYTES

    file = DataFile(path, field, label)
    _check_size(file, MAX_INPUT_BYTES)
    described, *batches = read_bounded(_labelled, file, columns, error=PopulationFileError, limits=TABLE_LIMITS,
                                       preload=("pyreadstat", "pandas"))
    if not isinstance(described, dict) or not all(isinstance(batch, list) for batch in batches):
        raise PopulationFileError(f"{label!r} cannot be read: its reading process answered something other than rows",
                                  field)
    rows = [row for batch in batches for row in batch]
    if not all(isinstance(row, dict) for row in rows):
        raise PopulationFileError(f"{label!r} cannot be read: its reading process answered something other than rows",
                                  field)
    return rows, described


def _shown(spec: Any) -> bool:
    """A persona or target column: one whose question and labels mean something (an id or a weight has none)."""
    return isinstance(spec, Mapping) and spec.get("role") in ("persona", "target")


def read_survey(entry: Mapping[str, Any], index: int, locate: Callable[[str, str], Path]) -> dict[str, Any]:
    """``entry`` (a population with ``codebook``) with its table's ``rows`` and its codebook as a mapping filled in.

    Raises:
        PopulationFileError: the codebook or the table cannot be read, or lacks a column the codebook lists.
    """
    field = f"population.{index}"
    codebook = _codebook_data(entry["codebook"], locate, f"{field}.codebook")
    if "rows" in entry:
        return {**entry, "codebook": codebook}
    name = entry.get("from")
    if not isinstance(name, str) or not name:
        raise PopulationFileError("a population with a codebook reads its respondents from a file: name it in 'from'",
                                  f"{field}.from")
    if entry.get("columns") is not None:
        raise PopulationFileError("a survey's codebook chooses its columns: leave 'columns' out", f"{field}.columns")
    columns = _listed_columns(codebook, f"{field}.codebook")
    path = locate(f"{field}.from", name)
    if path.suffix.lower() not in LABELLED_SUFFIXES:
        rows = read_table(path, field=f"{field}.from", label=name, columns=columns)
        return {**entry, "codebook": codebook, "rows": rows}
    rows, described = _read_labelled(path, columns, f"{field}.from", name)
    if not rows:
        raise PopulationFileError(f"{name!r} has no rows", f"{field}.from")
    listed = {column: {**(described.get(column, {}) if _shown(spec) else {}), **(spec if isinstance(spec, Mapping) else {})}
              for column, spec in codebook["columns"].items()}
    return {**entry, "codebook": {**codebook, "columns": listed}, "rows": rows}
