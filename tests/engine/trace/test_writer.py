"""Trace shards are JSONL, atomic and idempotent per name; writing them never loads DuckDB."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.errors import StorageError
from engine.storage.store import MemoryStore
from engine.trace import Span, TraceRecorder, read_trace_shard, write_trace_shard


def _spans(n: int) -> list[Span]:
    rec = TraceRecorder()
    for i in range(n):
        with rec.span("agent", i=i, when=Path("/x")):
            pass
    return rec.drain()


def test_write_trace_shard_writes_one_json_line_per_span(tmp_path: Path) -> None:
    spans = _spans(3)
    key = write_trace_shard(tmp_path, "step_000001-part_0000", spans)
    assert key == "trace/step_000001-part_0000.jsonl"
    lines = (tmp_path / key).read_text().splitlines()
    assert len(lines) == 3
    first = json.loads(lines[0])
    assert first["name"] == "agent" and first["attrs"] == {"i": 0, "when": "/x"}
    assert [s.span_id for s in read_trace_shard(tmp_path, key)] == [s.span_id for s in spans]


def test_rewriting_a_trace_shard_replaces_it(tmp_path: Path) -> None:
    store = MemoryStore()
    write_trace_shard(store, "s", _spans(3))
    key = write_trace_shard(store, "s", _spans(1), txn=None)
    assert key is not None
    assert len(read_trace_shard(store, key)) == 1
    assert store.list_prefix("") == ["trace/s.jsonl"]
    staged = write_trace_shard(store, "s", _spans(2), txn=5)
    assert staged == "trace/s.jsonl.staged-000005" and len(read_trace_shard(store, staged)) == 2


def test_empty_spans_write_nothing_and_bad_names_are_rejected(tmp_path: Path) -> None:
    assert write_trace_shard(tmp_path, "s", []) is None
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(StorageError, match="invalid shard name"):
        write_trace_shard(tmp_path, "../s", _spans(1))


def test_trace_and_replay_writers_do_not_import_duckdb() -> None:
    code = (
        "import sys, engine.trace, engine.storage\n"
        "from engine.storage import ReplayWriter, format_table\n"
        "assert 'duckdb' not in sys.modules, 'duckdb imported'\n"
        "from engine.storage import ReplayReader\n"
        "assert 'duckdb' in sys.modules\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[3], timeout=60)


def test_write_tick_span_writes_one_tick_span_per_step_and_a_rerun_replaces_it(tmp_path: Path) -> None:
    from engine.trace import write_tick_span

    first = write_tick_span(tmp_path, 3, 1_700_000_000_000.0, 1.5, agents=20)
    again = write_tick_span(tmp_path, 3, 1_700_000_001_000.0, 0.25, agents=20)
    assert first == again == "trace/step_000003-part_tick.jsonl"
    (span,) = read_trace_shard(tmp_path, again)
    assert (span.name, span.parent_id, span.status) == ("tick", None, "ok")
    assert span.duration_ms == 250.0 and span.start_unix_ms == 1_700_000_001_000.0
    assert span.attrs == {"step": 3, "agents": 20}
