"""Every route's body is bounded, a 422 never echoes a request back whole, and oversized numbers are a 422, not a
500: on a real uvicorn, plus the middleware and the excerpt on their own."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from engine.cluster_options import IN_PROCESS
from service.admission.limits import EXCERPT_CHARS, BodyLimit, Slots, excerpt
from service.errors import TooManyRequestsError
from service.settings import ServiceSettings
from tests.service.live import serve

LIMIT = 64 * 1024


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = ServiceSettings(data_dir=tmp_path_factory.mktemp("polis-limits"), scheduler=IN_PROCESS, max_body_bytes=LIMIT)
    with serve(settings) as client:
        yield client


@pytest.mark.parametrize("route", ["/experiments/nosuch/sql", "/experiments/nosuch/steps", "/experiments/nosuch/fork",
                                   "/experiments/nosuch/resume", "/experiments"])
def test_a_body_over_the_limit_is_refused_on_every_route(http: httpx.Client, route: str) -> None:
    big = json.dumps({"sql": "x" * (LIMIT + 10)})
    declared = http.post(route, content=big, headers={"Content-Type": "application/json"})
    assert declared.status_code == 413, declared.text
    assert f"at most {LIMIT}" in declared.json()["detail"] or f"over {LIMIT}" in declared.json()["detail"]

    def chunks() -> Iterator[bytes]:  # no Content-Length: the limit holds while the body streams
        for _ in range(LIMIT // 4096 + 2):
            yield b"x" * 4096

    streamed = http.post(route, content=chunks(), headers={"Content-Type": "application/json"})
    assert streamed.status_code == 413, streamed.text


def test_a_body_under_the_limit_reaches_its_route(http: httpx.Client) -> None:
    response = http.post("/experiments/nosuch/sql", json={"sql": "SELECT 1"})
    assert response.status_code == 404  # the route ran: no such experiment


def test_a_422_shows_an_excerpt_of_the_input_not_the_input(http: httpx.Client) -> None:
    response = http.post("/experiments/nosuch/sql", json={"sql": ["y" * 50_000]})
    assert response.status_code == 422
    assert len(response.content) < 2_000
    (item,) = [i for i in response.json()["detail"] if i["loc"][-1] == "sql"]
    assert item["input"].endswith("characters)") and len(item["input"]) < EXCERPT_CHARS + 40


@pytest.mark.parametrize("kind", ["json", "yaml"])
def test_a_number_too_long_to_read_is_a_422_naming_it(http: httpx.Client, kind: str) -> None:
    number = "9" * 5_000
    body = f'{{"name": "n", "seed": {number}}}' if kind == "json" else f"name: n\nseed: {number}\n"
    response = http.post("/experiments", content=body, headers={"Content-Type": f"application/{kind}"})
    assert response.status_code == 422, response.text
    assert "number too long to read" in response.text


def test_a_last_event_id_of_thousands_of_digits_restarts_the_stream(http: httpx.Client, make_spec_data: Any) -> None:
    created = http.post("/experiments", json=make_spec_data("events-digits"))
    assert created.status_code == 201, created.text
    with http.stream("GET", f"/experiments/{created.json()['id']}/events", headers={"Last-Event-ID": "7" * 5_000}) as stream:
        assert stream.status_code == 200
        first = next(stream.iter_lines())
    assert first.startswith(("id:", "event:", ":"))


def test_excerpt_keeps_short_values_and_cuts_long_ones() -> None:
    assert excerpt({"a": 1}) == {"a": 1}
    cut = excerpt("z" * 1_000)
    assert isinstance(cut, str) and cut.startswith('"zzz') and cut.endswith("(1,002 characters)")


def test_the_middleware_passes_a_small_body_whole_and_answers_a_large_one_itself() -> None:
    seen: list[bytes] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        message = await receive()
        seen.append(message["body"])
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def call(parts: list[bytes]) -> list[dict[str, Any]]:
        messages = [{"type": "http.request", "body": p, "more_body": i < len(parts) - 1} for i, p in enumerate(parts)]
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return messages.pop(0) if messages else {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await BodyLimit(app, max_bytes=10)({"type": "http", "method": "POST", "headers": []}, receive, send)
        return sent

    assert asyncio.run(call([b"abc", b"def"]))[0]["status"] == 204 and seen == [b"abcdef"]
    refused = asyncio.run(call([b"abcdef", b"ghijkl"]))
    assert refused[0]["status"] == 413 and len(seen) == 1  # the app never ran


def test_slots_cap_each_owner_and_everyone_and_free_on_the_way_out() -> None:
    slots = Slots("SQL queries", (2, "PER_OWNER"), (3, "TOTAL"))
    with slots.hold("a"), slots.hold("a"):
        with pytest.raises(TooManyRequestsError, match=r"a has 2 SQL queries open, the most one owner may \(PER_OWNER=2\)"):
            slots.check("a")
        with slots.hold("b"):
            with pytest.raises(TooManyRequestsError, match=r"the service has 3 SQL queries open, .*TOTAL=3"):
                slots.check("c")
        with pytest.raises(RuntimeError), slots.hold("b"):
            raise RuntimeError("the query failed")
        assert slots.held("b") == 0 and slots.held() == 2
    assert slots.held() == 0


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, Any]]:
    settings = ServiceSettings(data_dir=tmp_path_factory.mktemp("polis-capped"), scheduler=IN_PROCESS,
                               sql_max_concurrent_per_owner=1, events_max_streams_per_owner=2)
    apps: list[Any] = []
    with serve(settings, apps=apps) as client:
        yield client, apps[0].state.polis


def test_an_owner_past_its_concurrent_sql_queries_gets_a_429(capped: tuple[httpx.Client, Any], make_spec_data: Any) -> None:
    http, state = capped
    experiment = http.post("/experiments", json=make_spec_data("sql-cap")).json()["id"]
    owner = state.registry.get(experiment).owner
    with state.sql_slots.hold(owner):  # the owner's one query is running
        refused = http.post(f"/experiments/{experiment}/sql", json={"sql": "SELECT 1 AS one"})
    assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
    assert "POLIS_SQL_MAX_CONCURRENT_PER_OWNER=1" in refused.json()["detail"]
    assert http.post(f"/experiments/{experiment}/sql", json={"sql": "SELECT 1 AS one"}).status_code == 200
    assert state.sql_slots.held() == 0


def test_an_owner_past_its_open_event_streams_gets_a_429(capped: tuple[httpx.Client, Any], make_spec_data: Any) -> None:
    http, state = capped
    long_run = {**make_spec_data("stream-cap"), "steps": [{"type": "run", "num_steps": 100_000, "tick": 60}]}
    experiment = http.post("/experiments", json=long_run).json()["id"]  # its streams stay open until it is cancelled
    url = f"/experiments/{experiment}/events"
    with http.stream("GET", url) as first, http.stream("GET", url) as second:
        # Keep the line iterators: one dropped is collected and closes its connection, and the server frees the slot.
        lines = [first.iter_lines(), second.iter_lines()]
        next(lines[0]), next(lines[1])  # both streams have started: each holds its slot
        assert state.stream_slots.held() == 2
        with http.stream("GET", url) as refused:  # a stream, so a wrongly admitted one fails here instead of hanging
            assert refused.status_code == 429
            assert "POLIS_EVENTS_MAX_STREAMS_PER_OWNER=2" in json.loads(refused.read())["detail"]
        time.sleep(0.5)
        assert state.stream_slots.held() == 2  # still open while the client keeps them
    deadline = time.monotonic() + 60
    while state.stream_slots.held() and time.monotonic() < deadline:  # the server notices the closed streams
        time.sleep(0.05)
    assert state.stream_slots.held() == 0
    with http.stream("GET", url) as again:
        assert again.status_code == 200
    assert http.post(f"/experiments/{experiment}/cancel").status_code == 202
