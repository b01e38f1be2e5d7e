"""The bounded reader: a parse in a child process the OS limits, so a crash, a bomb or a runaway parse is a clear
error naming the file, and the caller lives on; and Parquet checked by its footer and dictionaries before decoding.

The targets below run in the child (it imports this module by name), each doing one thing a hostile file makes a
parser do."""

from __future__ import annotations

import ctypes
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.errors import NetworkFileError, PopulationFileError
from engine.population.bounded_read import DataFile, ReadLimits, read_bounded, read_parquet_within

FIELD = "population.0.from"


def crash(file: DataFile) -> Iterator[Any]:
    ctypes.string_at(0)  # reads address 0: SIGSEGV, as a parser's bad pointer does
    yield None


def allocate(file: DataFile) -> Iterator[Any]:
    yield len(bytearray(4 * 2**30))


def spin(file: DataFile) -> Iterator[Any]:
    while True:
        pass
    yield None


def sleep(file: DataFile) -> Iterator[Any]:
    time.sleep(600)
    yield None


def answer(file: DataFile, size: int) -> Iterator[Any]:
    yield "x" * size


def raise_with_path(file: DataFile) -> Iterator[Any]:
    raise ValueError(f"cannot open {file.path.absolute()} in {file.path.absolute().parent}")
    yield None


def parts(file: DataFile) -> Iterator[Any]:
    yield {"rows": [{"a": 1, "b": "two", "c": 3.5, "d": True, "e": None}]}
    yield np.arange(5, dtype=np.int64)
    yield np.linspace(0, 1, 3)


def read(target, file: DataFile, *args: Any, **limits: Any) -> list[Any]:
    return read_bounded(target, file, *args, error=PopulationFileError, limits=ReadLimits(**limits))


@pytest.fixture
def file(tmp_path: Path) -> DataFile:
    path = tmp_path / "private" / "people.csv"
    path.parent.mkdir()
    path.write_text("name\nAnn\n")
    return DataFile(path, FIELD, "people.csv")


@pytest.mark.usefixtures("reads_data_files")
def test_json_values_and_numeric_arrays_come_back_as_the_child_yielded_them(file: DataFile):
    rows, ids, shares = read(parts, file)
    assert rows == {"rows": [{"a": 1, "b": "two", "c": 3.5, "d": True, "e": None}]}
    assert ids.dtype == np.int64 and ids.tolist() == [0, 1, 2, 3, 4]
    assert shares.dtype == np.float64 and shares.tolist() == [0.0, 0.5, 1.0]


@pytest.mark.usefixtures("reads_data_files")
@pytest.mark.parametrize(("target", "args", "limits", "says"), [
    (crash, (), {}, "cannot be read: its parser crashed on it (SIGSEGV)"),
    (allocate, (), {"memory_mb": 256}, "needs more than 256 MiB of memory to read"),
    (spin, (), {"cpu_s": 1}, "took more than 1 s of CPU to read"),
    (sleep, (), {"wall_s": 2.0}, "took more than 2 s to read"),
    (answer, (10_000,), {"output_bytes": 1000}, "reads into more than 1000 bytes"),
])
def test_a_child_that_crashes_or_passes_a_limit_is_an_error_naming_the_file(file: DataFile, target, args, limits, says):
    with pytest.raises(PopulationFileError) as caught:
        read(target, file, *args, **limits)
    assert caught.value.path == FIELD and f"'people.csv' {says}" in str(caught.value), str(caught.value)
    assert read(parts, file)[1].tolist() == [0, 1, 2, 3, 4]  # and the caller reads on


@pytest.mark.usefixtures("reads_data_files")
def test_a_childs_message_names_the_file_by_its_label_never_its_path(file: DataFile):
    with pytest.raises(PopulationFileError) as caught:
        read(raise_with_path, file)
    message = str(caught.value)
    assert "ValueError: cannot open people.csv in the file's folder" in message
    assert str(file.path.parent) not in message and "private" not in message


@pytest.mark.usefixtures("reads_data_files")
def test_the_error_class_is_the_callers(file: DataFile):
    with pytest.raises(NetworkFileError):
        read_bounded(crash, file, error=NetworkFileError)


def dictionary_bomb(path: Path) -> Path:
    """1,500 rows of one 1 MiB string, dictionary-encoded and zstd-compressed: a few hundred bytes on disk,
    1.5 GB decoded."""
    name = pa.DictionaryArray.from_arrays(pa.array(np.zeros(1500, dtype=np.int32)), pa.array(["x" * 2**20]))
    pq.write_table(pa.table({"name": name}), path, compression="zstd")
    return path


def test_a_parquet_dictionary_bomb_is_refused_by_its_decoded_size_before_it_is_decoded(tmp_path: Path):
    path = dictionary_bomb(tmp_path / "bomb.parquet")
    assert path.stat().st_size < 1000
    # Its footer says 1 MiB, the dictionary page: the bound that holds is the dictionary's, counted per row.
    with pytest.raises(ValueError, match="decodes to 1572876000 bytes; at most 10000000 are allowed"):
        read_parquet_within(path, ["name"], max_rows=10_000, max_bytes=10_000_000, fail=ValueError)
    # Without its stored Arrow schema (another writer's file) the column is still read as a dictionary first.
    pq.write_table(pq.read_table(path, read_dictionary=["name"]).replace_schema_metadata(None), tmp_path / "plain.parquet",
                   compression="zstd", store_schema=False)
    with pytest.raises(ValueError, match="decodes to 1572876000 bytes"):
        read_parquet_within(tmp_path / "plain.parquet", ["name"], max_rows=10_000, max_bytes=10_000_000, fail=ValueError)


def test_a_parquet_file_whose_footer_says_it_is_too_large_is_refused_before_any_column_is_read(tmp_path: Path):
    path = tmp_path / "ints.parquet"  # 8 columns of 10,000 zeros: run-length encoded in a few bytes, 640 kB decoded
    pq.write_table(pa.table({f"c{i}": np.zeros(10_000, dtype=np.int64) for i in range(8)}), path)
    assert path.stat().st_size < 20_000
    with pytest.raises(ValueError, match="holds 640000 bytes uncompressed, by its footer; at most 100000"):
        read_parquet_within(path, [f"c{i}" for i in range(8)], max_rows=10_000, max_bytes=100_000, fail=ValueError)
    assert read_parquet_within(path, ["c0"], max_rows=10_000, max_bytes=100_000, fail=ValueError).num_rows == 10_000
    with pytest.raises(ValueError, match="has 10000 rows; at most 9999 are allowed"):
        read_parquet_within(path, ["c0"], max_rows=9_999, max_bytes=100_000, fail=ValueError)
