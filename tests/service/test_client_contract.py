"""What ``PolisClient`` sends for the routes other branches add (resume, steps, fork, delete, sql, agents, report),
checked against the REST contract, and the typed models it reads their answers into.

The service side of these routes is tested on a live server where it lands; here an
``httpx.MockTransport`` stands for it, so the requests and the decoding of JSON, Arrow and Parquet
answers are pinned down now.
"""

from __future__ import annotations

import io
import json
from typing import Any

import httpx
import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq
import pytest

from service.client import ARROW_STREAM, PARQUET, PolisClient
from service.client_errors import ConflictError, NotAcceptableError, NotFoundError, QueryRefusedError, ServerError
from service.schemas import AgentFiles, AgentMemory, ExperimentAccepted, ExperimentBrief, ExperimentDetail, SqlResult

TABLE = pa.table({"agent_id": [0, 1], "action": ["post", "wait"]})


def accepted(experiment_id: str, status: str = "queued", **more: Any) -> dict[str, Any]:
    """An ``ExperimentAccepted`` body as the service answers it."""
    return {"id": experiment_id, "name": f"exp-{experiment_id}", "owner": "lab-a", "status": status,
            "created_at": "2025-01-02T03:04:05Z", "started_at": None, "finished_at": None, "error": None,
            "progress": {"ticks_done": 0, "ticks_total": 2, "agent_steps_done": 0, "agent_steps_total": 8},
            "dashboard_link": None, "report": f"/experiments/{experiment_id}/report",
            "events": f"/experiments/{experiment_id}/events", **more}


def detail(experiment_id: str, status: str = "completed") -> dict[str, Any]:
    """An ``ExperimentDetail`` body: the accepted fields, its usage and its spec."""
    usage = {"llm_calls": 16, "input_tokens": 1800, "output_tokens": 120, "duration_s": 1.5}
    return accepted(experiment_id, status, usage=usage, spec={"name": f"exp-{experiment_id}"})


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


def test_resume_posts_an_optional_budget_and_run_options() -> None:
    fake = Recorder({("POST", "/experiments/e1/resume"): httpx.Response(202, json=accepted("e1"))})
    with fake.client() as client:
        resumed = client.resume("e1")
        client.resume("e1", budget={"max_calls": 500})
        client.resume("e1", batch_size=64, max_workers=4)
    assert isinstance(resumed, ExperimentAccepted) and resumed.status == "queued" and resumed.events == "/experiments/e1/events"
    assert fake.requests[0].content == b""
    assert json.loads(fake.requests[1].content) == {"budget": {"max_calls": 500}}
    assert json.loads(fake.requests[2].content) == {"batch_size": 64, "max_workers": 4}
    assert fake.requests[0].headers["authorization"] == "Bearer polis_t"


def test_steps_posts_the_steps_under_one_key() -> None:
    steps = [{"type": "questionnaire", "questionnaire_id": "mood",
              "questions": [{"id": "q1", "prompt": "How happy are you, 1 to 5?", "response_type": "integer"}]}]
    fake = Recorder({("POST", "/experiments/e1/steps"): httpx.Response(202, json=accepted("e1"))})
    with fake.client() as client:
        queued = client.steps("e1", steps)
    assert json.loads(fake.requests[0].content) == {"steps": steps}
    assert isinstance(queued, ExperimentAccepted) and queued.id == "e1" and queued.progress.agent_steps_total == 8


def test_fork_posts_the_tick_the_patch_and_a_name_only_when_given() -> None:
    patch = {"steps": [{"type": "run", "num_steps": 2}, {"type": "intervene", "instruction": "Rain all day."}]}
    fork = accepted("f1", forked_from={"experiment": "e1", "at_step": 2})
    fake = Recorder({("POST", "/experiments/e1/fork"): httpx.Response(201, json=fork)})
    with fake.client() as client:
        forked = client.fork("e1", 2)
        client.fork("e1", 1, patch=patch, name="rain")
    assert isinstance(forked, ExperimentAccepted) and forked.id == "f1"
    assert forked.forked_from is not None and (forked.forked_from.experiment, forked.forked_from.at_step) == ("e1", 2)
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
        result = client.sql("e1", "SELECT count(*) AS n FROM actions", max_rows=10)
    assert isinstance(result, SqlResult) and result.rows == [[8]] and result.truncated is False
    assert [(c.name, c.type) for c in result.columns] == [("n", "BIGINT")]
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


def test_submit_cancel_get_and_list_read_the_routes_models() -> None:
    brief = {k: v for k, v in accepted("e2", "completed").items() if k not in {"dashboard_link", "report", "events"}}
    fake = Recorder({
        ("POST", "/experiments"): httpx.Response(201, json=accepted("e1")),
        ("POST", "/experiments/e1/cancel"): httpx.Response(202, json=accepted("e1", "running")),
        ("GET", "/experiments/e1"): httpx.Response(200, json=detail("e1", "cancelled")),
        ("GET", "/experiments"): httpx.Response(200, json={"experiments": [brief]}),
    })
    with fake.client() as client:
        submitted = client.submit({"name": "exp-e1"})
        cancelling = client.cancel("e1")
        got = client.get("e1")
        listed = client.list()
    assert isinstance(submitted, ExperimentAccepted) and submitted.report == "/experiments/e1/report"
    assert submitted.owner == "lab-a" and submitted.created_at.year == 2025
    assert isinstance(cancelling, ExperimentAccepted) and cancelling.status == "running"
    assert isinstance(got, ExperimentDetail) and got.status == "cancelled" and got.spec == {"name": "exp-e1"}
    assert got.usage is not None and got.usage.llm_calls == 16 and got.usage.duration_s == 1.5
    assert [type(e) for e in listed] == [ExperimentBrief] and listed[0].id == "e2" and listed[0].status == "completed"


def test_datasets_are_dataset_infos_with_their_columns() -> None:
    column = {"name": "agent_id", "type": "BIGINT", "description": "the agent"}
    body = {"experiment_id": "e1", "datasets": [
        {"name": "actions", "kind": "core", "description": "one row per agent-step", "rows": 8, "columns": [column]}]}
    fake = Recorder({("GET", "/experiments/e1/datasets"): httpx.Response(200, json=body)})
    with fake.client() as client:
        (actions,) = client.datasets("e1")
    assert (actions.name, actions.kind, actions.rows) == ("actions", "core", 8)
    assert actions.columns[0].name == "agent_id" and actions.columns[0].type == "BIGINT"


def test_agent_routes_send_the_step_and_read_the_agent_its_files_and_a_file() -> None:
    memory = {"experiment_id": "e1", "agent_id": 1, "step": 1, "type": "person", "profile": {"name": "P1"},
              "config": {"max_react_turns": 1}, "memory": "# notes", "todo": None, "episodes": [{"step": 1}]}
    files = {"experiment_id": "e1", "agent_id": 1, "step": None, "files": [{"path": "memory/episodes.jsonl", "size": 12}]}
    fake = Recorder({
        ("GET", "/experiments/e1/agents/1"): httpx.Response(200, json=memory),
        ("GET", "/experiments/e1/agents/9"): httpx.Response(404, json={"detail": "run 'e1' has no agent 9"}),
        ("GET", "/experiments/e1/agents/1/files"): httpx.Response(200, json=files),
        ("GET", "/experiments/e1/agents/1/files/memory/episodes.jsonl"): httpx.Response(200, content=b'{"step": 1}\n'),
    })
    with fake.client() as client:
        agent = client.agent("e1", 1, step=1)
        listing = client.agent_files("e1", 1)
        content = client.agent_file("e1", 1, "memory/episodes.jsonl", step=1)
        with pytest.raises(NotFoundError, match="no agent 9"):
            client.agent("e1", 9)
    assert isinstance(agent, AgentMemory) and agent.profile == {"name": "P1"} and agent.episodes == [{"step": 1}]
    assert isinstance(listing, AgentFiles) and [(f.path, f.size) for f in listing.files] == [("memory/episodes.jsonl", 12)]
    assert content == b'{"step": 1}\n'
    assert [dict(r.url.params) for r in fake.requests] == [{"step": "1"}, {}, {"step": "1"}, {}]


def test_report_data_is_the_routes_json_and_the_page_its_html() -> None:
    data = {"signature": [], "report": {"title": "exp-e1", "summary": {"status": "completed"}, "errors": [], "panels": [],
                                        "datasets": [], "cells": [], "extra": {}}}
    fake = Recorder({
        ("GET", "/experiments/e1/report/data"): httpx.Response(200, json=data),
        ("GET", "/experiments/e1/report"): httpx.Response(200, text="<html>exp-e1</html>", headers={"content-type": "text/html"}),
    })
    with fake.client() as client:
        assert client.report_data("e1") == data
        assert client.report_page("e1") == "<html>exp-e1</html>"
