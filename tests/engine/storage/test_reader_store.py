"""The DuckDB reader over a run store on object storage: S3 (a real moto server) and fsspec's memory filesystem.

Shards are written as the writers lay them out (``replay/<dataset>/<shard>.parquet``, ``trace/<shard>.jsonl``,
``replay/_schema.json``), through the store, and read back through DuckDB with the store's fsspec filesystem
registered; the lockdown confines every query to the run's ``replay/`` and ``trace/`` prefixes.
"""

from __future__ import annotations

import contextlib
import io
import json
import socket
import uuid
from collections.abc import Iterator
from typing import Any

import fsspec
import pyarrow.parquet as pq
import pytest

from engine.errors import QueryError, StorageError
from engine.storage.catalog import Catalog, Column, DatasetSchema
from engine.storage.reader import ReplayReader
from engine.storage.replay import ReplayWriter, shard_name
from engine.storage.store import FsspecStore, MemoryStore, Store, open_store
from engine.trace import TraceRecorder, write_trace_shard
from tests.s3 import aws_environment, make_bucket, moto_server

BUCKET = "polis-reader-test"

AGENT = DatasetSchema(
    name="agent_state",
    kind="agent",
    columns=(
        Column(name="step", type="int64"),
        Column(name="agent_id", type="string"),
        Column(name="memory", type="json"),
    ),
)
ENV = DatasetSchema(name="env_events", kind="env", columns=(Column(name="step", type="int64"), Column(name="event", type="string")))


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    """A moto server with the bucket ``BUCKET``; the AWS environment points at it while this module runs."""
    with moto_server() as endpoint, pytest.MonkeyPatch.context() as monkeypatch:
        aws_environment(monkeypatch, endpoint)
        make_bucket(endpoint, BUCKET)
        yield endpoint


@pytest.fixture
def url(s3_endpoint: str) -> str:
    """A fresh run prefix in the bucket (nothing stored under it yet)."""
    return f"s3://{BUCKET}/runs/{uuid.uuid4().hex}"


def _rows(step: int, n: int) -> list[dict[str, Any]]:
    return [{"step": step, "agent_id": f"a{i}", "memory": {"mood": i}} for i in range(n)]


def _parquet(schema: DatasetSchema, rows: list[dict[str, Any]]) -> bytes:
    buffer = io.BytesIO()
    pq.write_table(schema.to_table(rows), buffer)
    return buffer.getvalue()


def _span(span_id: str, name: str, **attrs: Any) -> dict[str, Any]:
    return {
        "trace_id": "t1", "span_id": span_id, "parent_id": None, "name": name,
        "start_unix_ms": 1.0, "duration_ms": 2.5, "status": "ok", "attrs": attrs,
    }


def write_run(store: Store) -> None:
    """A run as the engine lays it out: two steps of agent rows, an empty env dataset, one trace shard."""
    catalog = Catalog(store.child("replay"))
    catalog.register(AGENT)
    catalog.register(ENV)
    store.set("replay/agent_state/step_000000-b0000.parquet", _parquet(AGENT, _rows(0, 3)))
    store.set("replay/agent_state/step_000001-b0000.parquet", _parquet(AGENT, _rows(1, 2)))
    store.set("replay/agent_state/step_000002-b0000.parquet.staged-000002", _parquet(AGENT, _rows(2, 9)))  # uncommitted
    spans = [_span("s1", "tick", step=0), _span("s2", "llm", model="m")]
    store.set("trace/w0-000001.jsonl", "".join(json.dumps(s) + "\n" for s in spans).encode())
    store.set("SOCIETY.json", b"{}")


@pytest.fixture
def s3_run(url: str) -> str:
    write_run(open_store(url))
    return url


# --- reading a run on S3 ---


def test_a_run_on_s3_reads_its_datasets_rows_and_spans(s3_run: str) -> None:
    with ReplayReader(s3_run) as reader:
        assert reader.run_dir is None and reader.location == s3_run and reader.sweep is None
        assert reader.datasets() == ["agent_state", "env_events"]
        assert reader.count("agent_state") == 5  # the staged shard is not read
        assert reader.count("env_events") == 0
        rows = reader.query("SELECT step, agent_id, memory->>'mood' AS mood FROM agent_state WHERE step = 1 ORDER BY agent_id")
        assert rows.to_pylist() == [{"step": 1, "agent_id": "a0", "mood": "0"}, {"step": 1, "agent_id": "a1", "mood": "1"}]
        spans = reader.query("SELECT span_id, name, duration_ms, attrs->>'model' AS model FROM spans ORDER BY span_id")
        assert spans.to_pylist() == [
            {"span_id": "s1", "name": "tick", "duration_ms": 2.5, "model": None},
            {"span_id": "s2", "name": "llm", "duration_ms": 2.5, "model": "m"},
        ]
        assert reader.query_capped("FROM agent_state", 4).truncated


def test_the_engines_writers_and_the_reader_agree_on_s3(url: str) -> None:
    Catalog(open_store(url).child("replay")).register(AGENT)
    ReplayWriter(url).write_shard(AGENT, shard_name(0, 0), _rows(0, 3))
    ReplayWriter(url, txn=1).write_shard(AGENT, shard_name(1, 0), _rows(1, 5))  # staged: not read until committed
    recorder = TraceRecorder()
    with recorder.span("agent.step"):
        pass
    write_trace_shard(url, shard_name(0, "driver"), recorder.drain())
    with ReplayReader(url) as reader:
        assert reader.count("agent_state") == 3
        assert reader.query("SELECT name FROM spans").to_pylist() == [{"name": "agent.step"}]


def test_shards_written_after_opening_are_visible_on_s3(s3_run: str) -> None:
    with ReplayReader(s3_run) as reader:
        assert reader.count("agent_state") == 5
        open_store(s3_run).set("replay/agent_state/step_000002-b0000.parquet", _parquet(AGENT, _rows(2, 4)))
        assert reader.count("agent_state") == 9


def test_a_run_store_can_be_passed_instead_of_its_url(s3_run: str) -> None:
    with ReplayReader(open_store(s3_run)) as reader:
        assert reader.count("agent_state") == 5
    with pytest.raises(StorageError, match="reads runs on local disk or an fsspec filesystem"):
        ReplayReader(MemoryStore())


def test_a_query_cannot_read_another_prefix_of_the_bucket(s3_run: str) -> None:
    secret = _parquet(ENV, [{"step": 1, "event": "secret"}])
    bucket = open_store(f"s3://{BUCKET}")
    bucket.set("other/x.parquet", secret)
    bucket.set(f"{s3_run.removeprefix(f's3://{BUCKET}/')}-old/replay/env_events/x.parquet", secret)  # a sibling prefix
    with ReplayReader(s3_run) as reader:
        # The run's own prefixes are readable by path (so the refusals below are the lockdown, not a broken filesystem).
        assert reader.query(f"SELECT count(*) AS n FROM read_parquet('{s3_run}/replay/agent_state/*.parquet')")["n"][0].as_py() == 5
        for path in [
            f"s3://{BUCKET}/other/x.parquet",
            f"s3a://{BUCKET}/other/x.parquet",
            f"{s3_run}-old/replay/env_events/x.parquet",  # shares the run's prefix as a string, not as a directory
            f"{s3_run}/replay/../../../other/x.parquet",
            f"{s3_run}/replay/agent_state/../../../../other/*.parquet",
            f"s3://{BUCKET}/*/x.parquet",
        ]:
            with pytest.raises(QueryError, match="Permission Error"):
                reader.query(f"SELECT * FROM read_parquet('{path}')")
        for sql in [
            f"SELECT * FROM glob('s3://{BUCKET}/*')",
            f"SELECT * FROM read_blob('s3://{BUCKET}/other/x.parquet')",
            f"SELECT * FROM read_text('{s3_run}/SOCIETY.json')",  # the run's root is outside replay/ and trace/
            "SELECT * FROM read_text('/etc/hostname')",
        ]:
            with pytest.raises(QueryError, match="Permission Error"):
                reader.query(sql)
        with pytest.raises(QueryError):
            reader.query("SET enable_external_access = true")


def test_a_sweep_root_on_s3_is_refused_clearly(url: str) -> None:
    open_store(url).set("SWEEP.json", b"{}")
    with pytest.raises(StorageError, match=rf"{url} is a sweep root: sweeps can be read from local disk only"):
        ReplayReader(url)


# --- runs that cannot be read ---


def test_a_prefix_that_holds_nothing_yet_is_an_empty_run(url: str) -> None:
    with ReplayReader(url) as reader:  # as a local run directory that does not exist yet
        assert reader.datasets() == []
        assert reader.query("SELECT count(*) AS n FROM spans").column("n")[0].as_py() == 0


def test_a_url_without_a_bucket_is_refused(s3_endpoint: str) -> None:
    with pytest.raises(StorageError, match="a run's URL names a bucket"):
        ReplayReader("s3://")


def test_a_missing_bucket_is_a_clear_error(s3_endpoint: str) -> None:
    url = f"s3://polis-no-such-bucket-{uuid.uuid4().hex[:8]}/run"
    with pytest.raises(StorageError, match=rf"cannot open the replay of {url}: its bucket 'polis-no-such-bucket-.*' does not exist"):
        ReplayReader(url)


def test_an_unreachable_endpoint_is_a_clear_error(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    aws_environment(monkeypatch, f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "1")  # botocore would retry for ~10 s
    url = f"s3://{BUCKET}/unreachable-{uuid.uuid4().hex}"  # a new URL: a new filesystem that reads this environment
    with pytest.raises(StorageError, match=rf"cannot open the replay of {url}: .*EndpointConnectionError"):
        ReplayReader(url)


# --- fsspec's memory filesystem (in this process only) ---


@pytest.fixture
def memory_url() -> Iterator[str]:
    root = f"/polis-reader-{uuid.uuid4().hex}"
    try:
        yield f"memory://{root}"
    finally:
        with contextlib.suppress(FileNotFoundError):
            fsspec.filesystem("memory").rm(root, recursive=True)


def test_a_run_on_fsspecs_memory_filesystem_reads_in_process(memory_url: str) -> None:
    store = open_store(memory_url)
    assert isinstance(store, FsspecStore)
    write_run(store)
    store.set("replayed/x.parquet", _parquet(ENV, [{"step": 1}]))  # beside replay/, not in it
    with ReplayReader(memory_url) as reader:
        assert reader.datasets() == ["agent_state", "env_events"]
        assert reader.count("agent_state") == 5
        assert reader.query("SELECT count(*) AS n FROM spans")["n"][0].as_py() == 2
        # The views spell the root as the filesystem does (memory:///...); either spelling outside is refused.
        root = memory_url.removeprefix("memory://").lstrip("/")
        for path in [f"memory:///{root}/replayed/x.parquet", f"memory://{root}/replayed/x.parquet"]:
            with pytest.raises(QueryError, match="Permission Error"):
                reader.query(f"SELECT * FROM read_parquet('{path}')")


# --- the catalog on S3 ---


def test_catalog_on_the_s3_store(url: str) -> None:
    catalog = Catalog(open_store(url).child("replay"))
    assert catalog.load() == {}
    catalog.register(AGENT)
    catalog.register(ENV)
    catalog.register(AGENT)  # identical: nothing is written
    assert catalog.load() == {"agent_state": AGENT, "env_events": ENV}
    assert sorted(open_store(url).get_json("replay/_schema.json")["datasets"]) == ["agent_state", "env_events"]
    changed = AGENT.model_copy(update={"columns": (Column(name="step", type="string"),)})
    with pytest.raises(StorageError, match="'agent_state' is already registered with a different schema"):
        catalog.register(changed)
    assert catalog.location == f"{url}/replay/_schema.json"
