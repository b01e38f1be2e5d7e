"""Replay shards are whole, idempotent per name, staged inside a transaction, and sort by step."""

from __future__ import annotations

import io
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine.errors import StorageError
from engine.storage.catalog import Column, DatasetSchema
from engine.storage.replay import ReplayWriter, shard_name
from engine.storage.store import MemoryStore


@pytest.fixture
def schema() -> DatasetSchema:
    return DatasetSchema(
        name="agent_state",
        kind="agent",
        columns=(Column(name="step", type="int64"), Column(name="agent_id", type="string")),
    )


def test_write_shard_writes_parquet_under_the_dataset(tmp_path: Path, schema: DatasetSchema) -> None:
    key = ReplayWriter(tmp_path).write_shard(schema, "step_000001-part_0000", [{"step": 1, "agent_id": "a"}])
    assert key == "replay/agent_state/step_000001-part_0000.parquet"
    path = tmp_path / key
    assert pq.read_table(path).to_pylist() == [{"step": 1, "agent_id": "a"}]
    assert [p.name for p in path.parent.iterdir()] == [path.name]


def test_a_shard_in_a_transaction_is_staged(schema: DatasetSchema) -> None:
    store = MemoryStore()
    key = ReplayWriter(store).in_txn(4).write_shard(schema, "s", [{"step": 1, "agent_id": "a"}])
    assert key == "replay/agent_state/s.parquet.staged-000004"
    assert pq.read_table(io.BytesIO(store.get(key))).num_rows == 1


def test_rewriting_a_shard_replaces_it(schema: DatasetSchema) -> None:
    store = MemoryStore()
    writer = ReplayWriter(store)
    writer.write_shard(schema, "s", [{"step": 1, "agent_id": "a"}, {"step": 1, "agent_id": "b"}])
    key = writer.write_shard(schema, "s", [{"step": 1, "agent_id": "c"}])
    assert key is not None
    assert pq.read_table(io.BytesIO(store.get(key))).column("agent_id").to_pylist() == ["c"]
    assert store.list_prefix("") == [key]


def test_empty_rows_write_nothing(tmp_path: Path, schema: DatasetSchema) -> None:
    assert ReplayWriter(tmp_path).write_shard(schema, "s", []) is None
    assert list(tmp_path.iterdir()) == []


def test_rows_that_do_not_fit_write_nothing(schema: DatasetSchema) -> None:
    store = MemoryStore()
    with pytest.raises(StorageError, match="'step'"):
        ReplayWriter(store).write_shard(schema, "s", [{"step": "one"}])
    assert store.list_prefix("") == []


@pytest.mark.parametrize("bad", ["", "a/b", "../x", "..", ".hidden", "a b", "é", "a\\b"])
def test_invalid_shard_names_are_rejected(schema: DatasetSchema, bad: str) -> None:
    with pytest.raises(StorageError, match="invalid shard name"):
        ReplayWriter(MemoryStore()).write_shard(schema, bad, [{"step": 1}])


def test_shard_name_pads_so_names_sort_by_step() -> None:
    assert shard_name(3, 2) == "step_000003-part_0002"
    assert shard_name(3, "env") == "step_000003-part_env"
