"""Reading a survey population's files: the respondents' table and its codebook, into the spec's data.

The table is any file :mod:`engine.population.table` reads, or a Stata ``.dta`` or SPSS ``.sav``
file read by pyreadstat (the ``survey`` extra) with its own metadata: a column's label is its
question, and its value labels are its labels, wherever the codebook gives none. Codes a ``.dta`` or
``.sav`` file marks as missing (Stata's ``.a``-``.z``, SPSS's user-missing values) are read as no answer.

The codebook is a YAML file (named relative to the spec, like the table) or a mapping in the spec.
Both are written into the spec's data, so a stored spec carries its rows and codebook, and a resumed,
swept or forked run reads no file.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from engine.errors import PopulationFileError
from engine.population.table import read_table

__all__ = ["LABELLED_SUFFIXES", "read_survey"]

#: Files read with their labels (pyreadstat).
LABELLED_SUFFIXES = (".dta", ".sav")


def _codebook_data(value: Any, locate: Callable[[str, str], Path], field: str) -> dict[str, Any]:
    if isinstance(value, Mapping):
        return dict(value)
    if not isinstance(value, str) or not value:
        raise PopulationFileError("must name a YAML codebook or be one (a mapping with 'columns')", field)
    path = locate(field, value)
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise PopulationFileError(f"{value!r} cannot be read: {error.strerror or error} ({path})", field) from None
    except yaml.YAMLError as error:
        raise PopulationFileError(f"{value!r} is not YAML: {error}", field) from None
    if not isinstance(data, Mapping):
        raise PopulationFileError(f"{value!r} is not a codebook: it holds no mapping with 'columns'", field)
    return dict(data)


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


def _read_labelled(path: Path, columns: list[str], field: str, label: str) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """The rows of a ``.dta`` or ``.sav`` file (codes, not labels) and what its metadata says of each column."""
    try:
        import pyreadstat
    except ImportError:
        raise PopulationFileError(f"{label!r}: reading .dta and .sav files needs pyreadstat (pip install 'polis[survey]')",
                                  field) from None
    read = pyreadstat.read_dta if path.suffix.lower() == ".dta" else pyreadstat.read_sav
    try:
        _, meta = read(str(path), metadataonly=True)
        names = list(meta.column_names)
        if missing := [c for c in columns if c not in names]:
            raise PopulationFileError(f"{label!r} has no column {missing[0]!r}; its columns: {', '.join(names)}", field,
                                      column=missing[0])
        frame, meta = read(str(path), usecols=columns, apply_value_formats=False)
    except pyreadstat.ReadstatError as error:
        raise PopulationFileError(f"{label!r} cannot be read: {error}", field) from None
    rows = [{key: value for key, value in row.items() if not (value is None or (isinstance(value, float) and math.isnan(value)))}
            for row in frame.to_dict("records")]
    described: dict[str, dict[str, Any]] = {}
    for column in columns:
        about: dict[str, Any] = {}
        if question := (meta.column_names_to_labels or {}).get(column):
            about["question"] = question
        if labels := (meta.variable_value_labels or {}).get(column):
            about["labels"] = _in_code_order(labels)
        described[column] = about
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
    if not path.is_file():
        raise PopulationFileError(f"{name!r} is not a file ({path})", f"{field}.from")
    rows, described = _read_labelled(path, columns, f"{field}.from", name)
    if not rows:
        raise PopulationFileError(f"{name!r} has no rows", f"{field}.from")
    listed = {column: {**(described.get(column, {}) if _shown(spec) else {}), **(spec if isinstance(spec, Mapping) else {})}
              for column, spec in codebook["columns"].items()}
    return {**entry, "codebook": {**codebook, "columns": listed}, "rows": rows}
