"""Replay shards are atomic, idempotent per name, and sort by step."""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine.errors import StorageError
from engine.storage.catalog import Column, DatasetSchema
from engine.storage.replay import ReplayWriter, shard_name


@pytest.fixture
def schema() -> DatasetSchema:
    return DatasetSchema(
        name="agent_state",
        kind="agent",
        columns=(Column(name="step", type="int64"), Column(name="agent_id", type="string")),
    )


def test_write_shard_writes_parquet_under_dataset_dir(tmp_path: Path, schema: DatasetSchema) -> None:
    writer = ReplayWriter(tmp_path / "replay")
    path = writer.write_shard(schema, "step_000001-part_0000", [{"step": 1, "agent_id": "a"}])
    assert path == tmp_path / "replay" / "agent_state" / "step_000001-part_0000.parquet"
    assert pq.read_table(path).to_pylist() == [{"step": 1, "agent_id": "a"}]
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_rewriting_a_shard_replaces_it(tmp_path: Path, schema: DatasetSchema) -> None:
    writer = ReplayWriter(tmp_path)
    writer.write_shard(schema, "s", [{"step": 1, "agent_id": "a"}, {"step": 1, "agent_id": "b"}])
    path = writer.write_shard(schema, "s", [{"step": 1, "agent_id": "c"}])
    assert path is not None
    assert pq.read_table(path).column("agent_id").to_pylist() == ["c"]
    assert len(list(path.parent.iterdir())) == 1


def test_empty_rows_write_nothing(tmp_path: Path, schema: DatasetSchema) -> None:
    assert ReplayWriter(tmp_path).write_shard(schema, "s", []) is None
    assert list(tmp_path.iterdir()) == []


def test_rows_that_do_not_fit_write_nothing(tmp_path: Path, schema: DatasetSchema) -> None:
    with pytest.raises(StorageError, match="'step'"):
        ReplayWriter(tmp_path).write_shard(schema, "s", [{"step": "one"}])
    assert not (tmp_path / "agent_state").exists() or list((tmp_path / "agent_state").iterdir()) == []


@pytest.mark.parametrize("bad", ["", "a/b", "../x", "..", ".hidden", "a b", "é", "a\\b"])
def test_invalid_shard_names_are_rejected(tmp_path: Path, schema: DatasetSchema, bad: str) -> None:
    with pytest.raises(StorageError, match="invalid shard name"):
        ReplayWriter(tmp_path).write_shard(schema, bad, [{"step": 1}])


def test_shard_name_pads_so_names_sort_by_step() -> None:
    assert shard_name(3, 2) == "step_000003-part_0002"
    assert shard_name(3, "env") == "step_000003-part_env"
    names = [shard_name(s, p) for s in (10, 2, 100) for p in (11, 3)]
    assert sorted(names) == [shard_name(s, p) for s in (2, 10, 100) for p in (3, 11)]
    bad: list[tuple[int, str | int]] = [(-1, 0), (1, -1), (1, "a/b"), (True, 0), (1, False)]
    for bad_step, bad_part in bad:
        with pytest.raises(StorageError):
            shard_name(bad_step, bad_part)
