"""What ``PolisClient`` sends for the routes other branches add (resume, steps, fork, delete, sql), checked against the REST contract.

The service side of these routes is tested on a live server where it lands; here an
``httpx.MockTransport`` stands for it, so the requests and the decoding of JSON, Arrow and Parquet
answers are pinned down now.
"""

from __future__ import annotations

import io
import json

import httpx
import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq
import pytest

from service.client import ARROW_STREAM, PARQUET, PolisClient
from service.client_errors import ConflictError, NotAcceptableError, QueryRefusedError, ServerError

TABLE = pa.table({"agent_id": [0, 1], "action": ["post", "wait"]})


def arrow_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    with pyarrow.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def parquet_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


class Recorder:
    """A fake service: records each request and answers from a table of (method, path) → response."""

    def __init__(self, answers: dict[tuple[str, str], httpx.Response]) -> None:
        self.answers = answers
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.answers[(request.method, request.url.path)]

    def client(self) -> PolisClient:
        return PolisClient("http://polis.test", token="polis_t", transport=httpx.MockTransport(self))


def test_resume_posts_an_optional_budget() -> None:
    fake = Recorder({("POST", "/experiments/e1/resume"): httpx.Response(202, json={"id": "e1", "status": "queued"})})
    with fake.client() as client:
        assert client.resume("e1")["status"] == "queued"
        client.resume("e1", budget={"max_calls": 500})
    assert fake.requests[0].content == b""
    assert json.loads(fake.requests[1].content) == {"budget": {"max_calls": 500}}
    assert fake.requests[0].headers["authorization"] == "Bearer polis_t"


def test_steps_posts_the_steps_under_one_key() -> None:
    steps = [{"type": "questionnaire", "questionnaire_id": "mood",
              "questions": [{"id": "q1", "prompt": "How happy are you, 1 to 5?", "response_type": "integer"}]}]
    fake = Recorder({("POST", "/experiments/e1/steps"): httpx.Response(202, json={"id": "e1", "status": "queued"})})
    with fake.client() as client:
        client.steps("e1", steps)
    assert json.loads(fake.requests[0].content) == {"steps": steps}


def test_fork_posts_the_tick_the_patch_and_a_name_only_when_given() -> None:
    patch = {"steps": [{"type": "run", "num_steps": 2}, {"type": "intervene", "instruction": "Rain all day."}]}
    fake = Recorder({("POST", "/experiments/e1/fork"): httpx.Response(201, json={"id": "f1", "status": "queued"})})
    with fake.client() as client:
        assert client.fork("e1", 2)["id"] == "f1"
        client.fork("e1", 1, patch=patch, name="rain")
    assert json.loads(fake.requests[0].content) == {"at_step": 2, "patch": None}
    assert json.loads(fake.requests[1].content) == {"at_step": 1, "patch": patch, "name": "rain"}


def test_delete_sends_delete_and_a_409_is_a_conflict() -> None:
    fake = Recorder({
        ("DELETE", "/experiments/e1"): httpx.Response(204),
        ("DELETE", "/experiments/e2"): httpx.Response(409, json={"detail": "cannot delete experiment 'e2': it is running"}),
    })
    with fake.client() as client:
        assert client.delete("e1") is None
        with pytest.raises(ConflictError, match="it is running"):
            client.delete("e2")


def test_sql_as_json_sends_the_query_and_the_row_limit() -> None:
    body = {"columns": [{"name": "n", "type": "BIGINT"}], "rows": [[8]], "truncated": False}
    fake = Recorder({("POST", "/experiments/e1/sql"): httpx.Response(200, json=body)})
    with fake.client() as client:
        assert client.sql("e1", "SELECT count(*) AS n FROM actions", max_rows=10) == body
    assert json.loads(fake.requests[0].content) == {"sql": "SELECT count(*) AS n FROM actions", "max_rows": 10}


@pytest.mark.parametrize(("format", "media", "payload"), [("arrow", ARROW_STREAM, arrow_bytes(TABLE)),
                                                          ("parquet", PARQUET, parquet_bytes(TABLE))])
def test_sql_as_arrow_or_parquet_asks_by_accept_and_returns_a_table(format: str, media: str, payload: bytes) -> None:
    fake = Recorder({("POST", "/experiments/e1/sql"): httpx.Response(200, content=payload, headers={"content-type": media})})
    with fake.client() as client:
        table = client.sql("e1", "SELECT * FROM actions", format=format)
    assert fake.requests[0].headers["accept"] == media
    assert table.equals(TABLE)


def test_sql_errors_are_typed_by_status() -> None:
    fake = Recorder({
        ("POST", "/experiments/e1/sql"): httpx.Response(400, json={"detail": "query refused: COPY is not allowed"}),
        ("POST", "/experiments/e2/sql"): httpx.Response(406, json={"detail": "cannot answer Accept: image/png"}),
        ("POST", "/experiments/e3/sql"): httpx.Response(500, text="Internal Server Error"),
    })
    with fake.client() as client:
        with pytest.raises(QueryRefusedError, match="COPY"):
            client.sql("e1", "COPY actions TO '/tmp/x'")
        with pytest.raises(NotAcceptableError):
            client.sql("e2", "SELECT 1")
        with pytest.raises(ServerError) as raised:
            client.sql("e3", "SELECT 1")
    assert raised.value.detail == "Internal Server Error"
