"""Dataset reads run under the query limits they are given (the service passes its ``POLIS_QUERY_*``), as a value."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import QueryError
from engine.results.datasets import export_dataset, list_datasets
from engine.storage.catalog import Catalog, Column, DatasetSchema
from engine.storage.query_limits import QueryLimits
from engine.storage.replay import ReplayWriter, shard_name

NOTES = DatasetSchema(name="notes", kind="agent", columns=(Column(name="step", type="int64"), Column(name="text", type="string")))


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    replay = tmp_path / "replay"
    Catalog(replay).register(NOTES)
    ReplayWriter(tmp_path).write_shard(NOTES, shard_name(1, 0), [{"step": 1, "text": "x" * 1000} for _ in range(3000)])
    return tmp_path


def test_an_export_larger_than_the_memory_limit_is_refused_and_a_small_one_is_not(run_dir: Path, tmp_path: Path) -> None:
    assert list_datasets(run_dir, QueryLimits(memory_limit="1MiB"))[0].rows == 3000
    with pytest.raises(QueryError, match="result grew past its 1MiB memory limit"):
        export_dataset("exp", run_dir, "notes", tmp_path / "out.parquet", QueryLimits(memory_limit="1MiB"))
    assert export_dataset("exp", run_dir, "notes", tmp_path / "out.parquet", QueryLimits(memory_limit="64MB")) == 3000
