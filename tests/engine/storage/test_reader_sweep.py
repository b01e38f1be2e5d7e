"""ReplayReader on a sweep root: every cell's real Parquet shards as one DuckDB view with cell columns, locked down."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from engine.errors import QueryError, StorageError
from engine.storage.atomic import atomic_write_json
from engine.storage.catalog import Catalog, Column, DatasetSchema, with_run
from engine.storage.reader import ReplayReader
from engine.storage.replay import ReplayWriter, shard_name
from engine.storage.sweep_layout import (
    SWEEP_LOG_FILE,
    SweepLog,
    cell_dir,
    cells_table,
    param_column,
    read_sweep,
    read_sweep_manifest,
)
from engine.trace import TraceRecorder, write_trace_shard

CALLS = DatasetSchema(
    name="calls",
    kind="llm",
    columns=(Column(name="run", type="string"), Column(name="step", type="int64")),
)
EVENTS = DatasetSchema(name="events", kind="env", columns=(Column(name="event", type="string"),))


def _manifest(grid: dict[str, list[object]], cells: list[dict[str, object]]) -> dict[str, object]:
    return {"grid": grid, "replications": 1, "cells": [
        {"index": i, "cell_id": f"cell-{i:04d}", "replication": 0, "seed": 100 + i, "status": "completed", **cell}
        for i, cell in enumerate(cells)
    ]}


@pytest.fixture
def sweep_root(tmp_path: Path) -> Path:
    """Three cells under a ``run=abc`` directory; cell 2 never wrote a shard; no cell wrote ``events``."""
    root = tmp_path / "run=abc" / "sweep"
    grid = {"llm.default.options.temperature": [0.5, 1], "population.0.count": [2, 3]}
    atomic_write_json(root / "SWEEP.json", _manifest(grid, [
        {"params": {"llm.default.options.temperature": 0.5, "population.0.count": 2}},
        {"params": {"llm.default.options.temperature": 1, "population.0.count": 3}},
        {"params": {"llm.default.options.temperature": 1, "population.0.count": 2}, "status": "failed", "error": "boom"},
    ]))
    for index, rows in ((0, 2), (1, 3), (2, 0)):
        replay = cell_dir(root, index) / "replay"
        Catalog(replay).register(CALLS)
        Catalog(replay).register(EVENTS)
        for step in range(1, rows + 1):
            ReplayWriter(cell_dir(root, index)).write_shard(CALLS, shard_name(step, 0), [{"run": f"run-{index}", "step": step}])
        recorder = TraceRecorder()
        for _ in range(index):
            with recorder.span("agent.step"):
                pass
        write_trace_shard(cell_dir(root, index), shard_name(1, "driver"), recorder.drain())
    (cell_dir(root, 0) / "SOCIETY.json").write_text(json.dumps({"secret": "not for SQL"}))
    return root


def test_each_dataset_reads_every_cell_with_cell_columns_and_keeps_its_own_columns(sweep_root):
    with ReplayReader(sweep_root) as reader:
        rows = reader.query(
            "SELECT cell, replication, seed, param_llm_default_options_temperature AS temp, "
            "param_population_0_count AS n, run, count(*) AS shards FROM calls GROUP BY ALL ORDER BY cell"
        ).to_pylist()
        columns = reader.query("SELECT * FROM calls LIMIT 0").column_names

    # The ``run=abc`` directory above the root must not turn into a column overriding ``run``.
    assert rows == [
        {"cell": 0, "replication": 0, "seed": 100, "temp": 0.5, "n": 2, "run": "run-0", "shards": 2},
        {"cell": 1, "replication": 0, "seed": 101, "temp": 1.0, "n": 3, "run": "run-1", "shards": 3},
    ]
    assert columns == ["cell", "replication", "seed", "param_llm_default_options_temperature",
                       "param_population_0_count", "run", "step"]


def test_dataset_without_shards_and_spans_get_the_cell_columns_too(sweep_root):
    with ReplayReader(sweep_root) as reader:
        assert reader.datasets() == ["calls", "events"]
        assert reader.count("events") == 0
        assert reader.query("SELECT * FROM events").column_names[:3] == ["cell", "replication", "seed"]
        spans = reader.query("SELECT cell, count(*) AS n FROM spans GROUP BY cell ORDER BY cell").to_pylist()
        cells = reader.query("SELECT cell, cell_id, status, error FROM cells ORDER BY cell").to_pylist()

    assert spans == [{"cell": 1, "n": 1}, {"cell": 2, "n": 2}]
    assert cells[2] == {"cell": 2, "cell_id": "cell-0002", "status": "failed", "error": "boom"}


def test_a_cell_whose_dataset_gained_run_reads_beside_cells_whose_shards_lack_it(sweep_root):
    ReplayWriter(cell_dir(sweep_root, 0)).write_shard(EVENTS, shard_name(1, 0), [{"event": "old"}])
    grown = with_run(EVENTS)  # cell 1 was resumed by an engine that stamps run on every dataset
    Catalog(cell_dir(sweep_root, 1) / "replay").register(grown)
    ReplayWriter(cell_dir(sweep_root, 1)).write_shard(grown, shard_name(1, 0), [{"run": "run-1", "event": "new"}])
    with ReplayReader(sweep_root) as reader:
        table = reader.query("SELECT * EXCLUDE (param_llm_default_options_temperature, param_population_0_count) "
                             "FROM events ORDER BY cell")
    assert table.column_names == ["cell", "replication", "seed", "run", "event"]  # the grown schema's order
    assert [(r["cell"], r["run"], r["event"]) for r in table.to_pylist()] == [(0, None, "old"), (1, "run-1", "new")]


def test_sweep_reader_reads_only_the_cells_replay_and_trace(sweep_root):
    with ReplayReader(sweep_root) as reader:
        inside = sweep_root / "cells" / "cell=0001" / "replay" / "calls" / "*.parquet"
        assert reader.query(f"SELECT count(*) AS n FROM read_parquet('{inside}')").column("n")[0].as_py() == 3
        for path in (sweep_root / "SWEEP.json", cell_dir(sweep_root, 0) / "SOCIETY.json",
                     cell_dir(sweep_root, 0) / "replay" / ".." / "SOCIETY.json"):
            with pytest.raises(QueryError, match="Permission"):
                reader.query(f"SELECT * FROM read_text('{path}')")
        with pytest.raises(QueryError, match="only SELECT"):
            reader.query("SET enable_external_access = true")


def test_dataset_column_named_like_a_sweep_column_is_refused(tmp_path):
    atomic_write_json(tmp_path / "SWEEP.json", _manifest({}, [{"params": {}}]))
    clashing = DatasetSchema(name="draws", kind="agent", columns=(Column(name="seed", type="int64"),))
    Catalog(cell_dir(tmp_path, 0) / "replay").register(clashing)

    with pytest.raises(StorageError, match=r"'draws' has column\(s\) \['seed'\]"):
        ReplayReader(tmp_path)


def test_single_run_under_a_key_value_directory_gains_no_partition_columns(tmp_path):
    run = tmp_path / "run=abc"
    Catalog(run / "replay").register(CALLS)
    ReplayWriter(run).write_shard(CALLS, shard_name(1, 0), [{"run": "mine", "step": 1}])

    with ReplayReader(run) as reader:
        assert reader.sweep is None
        assert reader.query("SELECT * FROM calls").to_pylist() == [{"run": "mine", "step": 1}]


def test_manifest_is_none_for_a_run_and_malformed_manifests_are_storage_errors(tmp_path):
    assert read_sweep_manifest(tmp_path) is None
    atomic_write_json(tmp_path / "SWEEP.json", {"grid": {}})
    with pytest.raises(StorageError, match="malformed"):
        read_sweep_manifest(tmp_path)
    manifest = _manifest({}, [{"params": {}}, {"params": {}}])
    manifest["cells"][1]["index"] = 5  # type: ignore[index]
    atomic_write_json(tmp_path / "SWEEP.json", manifest)
    with pytest.raises(StorageError, match="not 0..1 in order"):
        read_sweep_manifest(tmp_path)


def test_cell_statuses_come_from_the_log_last_line_winning_and_a_torn_last_line_is_skipped(tmp_path):
    atomic_write_json(tmp_path / "SWEEP.json", _manifest({}, [{"params": {}, "status": "pending"}] * 3))
    log = SweepLog(tmp_path)
    log.record(0, status="running")
    log.record(1, status="running")
    log.record(0, status="failed", error="boom", summary={"ticks_done": 1})
    with open(tmp_path / SWEEP_LOG_FILE, "a") as torn:  # a crash mid-append
        torn.write('{"index": 1, "sta')

    doc = read_sweep(tmp_path)
    assert doc is not None
    assert [(c["status"], c.get("error")) for c in doc["cells"]] == [("failed", "boom"), ("running", None), ("pending", None)]
    assert doc["cells"][0]["summary"] == {"ticks_done": 1}
    assert [c.status for c in read_sweep_manifest(tmp_path).cells] == ["failed", "running", "pending"]  # type: ignore[union-attr]

    with open(tmp_path / SWEEP_LOG_FILE, "a") as log_file:
        log_file.write('\n{"index": 7, "status": "completed"}\n')  # a cell the manifest does not have
    with pytest.raises(StorageError, match="SWEEP_LOG.jsonl line 4 is malformed"):
        read_sweep(tmp_path)


def test_cells_table_gives_each_parameter_one_sql_type(tmp_path):
    grid = {"a": [1, 2], "b": [1, 2.5], "c": ["x", None], "d": [{"k": 1}, 5], "e": [True, False]}
    cells = [{"params": {"a": 1, "b": 1, "c": "x", "d": {"k": 1}, "e": True}},
             {"params": {"a": 2, "b": 2.5, "c": None, "d": 5, "e": False}}]
    atomic_write_json(tmp_path / "SWEEP.json", _manifest(grid, cells))
    manifest = read_sweep_manifest(tmp_path)
    assert manifest is not None

    table = cells_table(manifest)

    assert table.schema.field("param_a").type == pa.int64()
    assert table.column("param_b").to_pylist() == [1.0, 2.5]
    assert table.column("param_c").to_pylist() == ["x", None]
    assert table.column("param_d").to_pylist() == ['{"k": 1}', "5"]
    assert table.schema.field("param_e").type == pa.bool_()
    assert param_column("agents.*.config.max-turns") == "param_agents___config_max_turns"
