"""Persona tables read from real Parquet, CSV and JSONL files: values as profile fields, and every bad input named."""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.errors import PopulationFileError, SpecError
from engine.population import read_table
from engine.population.table import TABLE_LIMITS

pytestmark = pytest.mark.usefixtures("reads_data_files")  # tables are parsed in a child process

FIELD = "population.0.from"


def read(path: Path, columns: list[str] | None = None) -> list[dict[str, Any]]:
    return read_table(path, field=FIELD, label=path.name, columns=columns)


def refused(path: Path, columns: list[str] | None = None) -> PopulationFileError:
    with pytest.raises(PopulationFileError) as caught:
        read(path, columns)
    assert isinstance(caught.value, SpecError) and caught.value.path == FIELD
    assert str(caught.value).startswith(f"{FIELD}: {path.name!r} ")
    return caught.value


def test_parquet_keeps_its_column_types_and_drops_nulls(tmp_path: Path):
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({
        "name": ["Ann", "Bo"], "age": [34, None], "score": [1.5, 2.0], "member": [True, False],
        "city": pa.array(["Oslo", "Rome"]).dictionary_encode(),
    }), path)
    assert read(path) == [
        {"name": "Ann", "age": 34, "score": 1.5, "member": True, "city": "Oslo"},
        {"name": "Bo", "score": 2.0, "member": False, "city": "Rome"},
    ]


def test_csv_columns_become_numbers_or_booleans_only_when_every_cell_is_one(tmp_path: Path):
    path = tmp_path / "p.csv"
    path.write_text("name,age,income,zip,member,born,note\n"
                    "Ann,34,1200.5,007,true,2001-02-03,\n"
                    "Bo,,-3e2,120,False,2002-03-04,\"a, b\"\n")
    assert read(path) == [
        {"name": "Ann", "age": 34, "income": 1200.5, "zip": "007", "member": True, "born": "2001-02-03"},
        {"name": "Bo", "income": -300.0, "zip": "120", "member": False, "born": "2002-03-04", "note": "a, b"},
    ]


def test_jsonl_rows_are_its_objects_numbered_by_line_with_blank_lines_skipped(tmp_path: Path):
    path = tmp_path / "p.jsonl"
    path.write_text('{"name": "Ann", "age": 34}\n\n{"name": "Bo", "age": null, "vip": true}\n')
    assert read(path) == [{"name": "Ann", "age": 34}, {"name": "Bo", "vip": True}]
    path.write_text('{"name": "Ann"}\n\n{"name": ["B", "o"]}\n')
    error = refused(path)
    assert (error.row, error.column) == (3, "name")
    assert "row 3, column 'name': a list cannot be a profile field" in str(error)


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_listed_columns_are_the_only_ones_read_and_a_missing_one_is_named(tmp_path: Path, suffix: str):
    path = tmp_path / f"p{suffix}"
    rows = [{"name": "Ann", "age": 34, "city": "Oslo"}, {"name": "Bo", "age": 50, "city": "Rome"}]
    if suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    elif suffix == ".csv":
        path.write_text("name,age,city\nAnn,34,Oslo\nBo,50,Rome\n")
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert read(path, ["city", "name"]) == [{"city": "Oslo", "name": "Ann"}, {"city": "Rome", "name": "Bo"}]
    error = refused(path, ["name", "income"])
    assert error.column == "income" and "no column 'income'" in str(error)


def test_a_missing_file_and_an_unknown_extension_are_refused(tmp_path: Path):
    error = refused(tmp_path / "absent.csv")
    assert "cannot be read" in str(error) and error.row is None
    (tmp_path / "people.xlsx").write_bytes(b"PK\x03\x04")
    assert "name a .parquet, .csv, .jsonl file" in str(refused(tmp_path / "people.xlsx"))
    (tmp_path / "folder.csv").mkdir()
    assert "is not a file" in str(refused(tmp_path / "folder.csv"))


@pytest.mark.parametrize(("name", "content", "expected"), [
    ("garbled.parquet", b"PAR1 this is not parquet at all", "cannot be read as PARQUET"),
    ("empty.csv", b"", "cannot be read as CSV"),
    ("latin1.csv", b"name\nJos\xe9\n", "cannot be read as CSV"),
    ("latin1.jsonl", b'{"name": "Jos\xe9"}\n', "is not UTF-8 text"),
    ("header.csv", b"name,age\n", "has no rows"),
    ("twice.csv", b"name,name\nA,B\n", "has the column 'name' twice"),
])
def test_a_file_that_does_not_parse_is_refused_with_the_reason(tmp_path: Path, name: str, content: bytes, expected: str):
    (tmp_path / name).write_bytes(content)
    assert expected in str(refused(tmp_path / name))


def test_a_csv_row_with_the_wrong_number_of_cells_is_named(tmp_path: Path):
    path = tmp_path / "p.csv"
    path.write_text("name,age\nAnn,34\nBo,50\nCy,40,extra\nDi,20\n")
    error = refused(path)
    assert error.row == 3 and "row 3 does not parse" in str(error) and "Expected 2 columns, got 3" in str(error)


@pytest.mark.parametrize(("line", "row", "column", "expected"), [
    ('{"name": "Bo", "age": NaN}', 2, "age", "nan is not a finite number"),
    ('{"name": "Bo", "age": Infinity}', 2, "age", "inf is not a finite number"),
    ('{"name": {"first": "Bo"}}', 2, "name", "an object cannot be a profile field"),
    ('["Bo", 50]', 2, None, "row 2 is not an object of column values"),
    ('{"name": "Bo", "": 1}', 2, None, "row 2 has a column without a name"),
    ('{"name": "Bo"', 2, None, "row 2 is not JSON"),
])
def test_a_jsonl_row_that_cannot_be_a_profile_is_named(tmp_path: Path, line: str, row: int, column: str | None, expected: str):
    path = tmp_path / "p.jsonl"
    path.write_text('{"name": "Ann", "age": 34}\n' + line + "\n")
    error = refused(path)
    assert (error.row, error.column) == (row, column)
    assert expected in str(error)


@pytest.mark.parametrize(("values", "kind", "expected"), [
    ([1.0, float("nan"), 3.0], None, "row 2, column 'x': nan is not a finite number"),
    ([None, [1, 2], [3]], None, "row 2, column 'x': a list<element: int64> value cannot be a profile field"),
    ([None, None, datetime(2020, 1, 1)], None, "row 3, column 'x': a timestamp[us] value cannot be a profile field"),
    ([None, {"a": 1}, None], None, "row 2, column 'x': a struct<a: int64> value cannot be a profile field"),
    ([b"a", b"b", b"c"], pa.binary(), "row 1, column 'x': a binary value cannot be a profile field"),
])
def test_a_parquet_value_that_cannot_be_a_profile_field_names_its_row_and_column(tmp_path: Path, values, kind, expected):
    path = tmp_path / "p.parquet"
    pq.write_table(pa.table({"name": ["A", "B", "C"], "x": pa.array(values, type=kind)}), path)
    error = refused(path)
    assert expected in str(error) and error.column == "x"
    # Leaving the column out is the way round it.
    assert read(path, ["name"]) == [{"name": "A"}, {"name": "B"}, {"name": "C"}]


def test_a_parquet_dictionary_bomb_is_refused_before_its_dictionary_is_decoded(tmp_path: Path):
    path = tmp_path / "bomb.parquet"  # 1,500 rows of one 1 MiB string: a few hundred bytes, 1.5 GB decoded
    name = pa.DictionaryArray.from_arrays(pa.array(np.zeros(1500, dtype=np.int32)), pa.array(["x" * 2**20]))
    pq.write_table(pa.table({"name": name}), path, compression="zstd")
    assert path.stat().st_size < 1000
    error = refused(path)
    # Counted, not decoded: decoding it would pass the reading process's memory limit, a different refusal.
    assert TABLE_LIMITS.memory_mb * 2**20 < 1572876000
    assert "decodes to 1572876000 bytes; at most 268435456 are allowed" in str(error)


def test_a_jsonl_row_nested_past_the_stack_is_refused_at_its_row(tmp_path: Path):
    path = tmp_path / "deep.jsonl"
    path.write_text('{"name": "Ann"}\n{"name": ' + "[" * 200_000 + "]" * 200_000 + "}\n")
    error = refused(path)
    assert error.row == 2 and "row 2 is nested too deeply to read" in str(error)
