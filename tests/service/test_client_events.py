"""The client's side of the event stream: the SSE parser, the progress line, and re-opening a dropped stream."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engine.run_progress import RunProgress, render_progress
from service.client import PolisClient
from service.client_errors import ConnectionFailedError, NotFoundError
from service.client_events import EventStreamParser, progress_line
from tests.service.test_client_contract import detail


def feed_all(parser: EventStreamParser, text: str) -> list[tuple[str, str, str | None]]:
    events = [parser.feed(line) for line in text.split("\n")]
    return [(e.event, e.data, e.id) for e in events if e is not None]


def test_parser_yields_named_events_with_their_ids_and_joined_data() -> None:
    stream = 'event: status\nid: 1\ndata: {"status":\ndata:  "running"}\n\n: keep-alive\n\nevent: tick\nid: 2\ndata: {}\n\n'
    assert feed_all(EventStreamParser(), stream) == [
        ("status", '{"status":\n "running"}', "1"),
        ("tick", "{}", "2"),
    ]


def test_parser_keeps_the_last_id_and_the_servers_retry_and_ignores_data_less_events() -> None:
    parser = EventStreamParser(last_event_id="7")
    assert feed_all(parser, "retry: 250\nid: 8\n\nevent: tick\n\ndata:x\n\n") == [("message", "x", "8")]
    assert (parser.last_event_id, parser.retry_ms) == ("8", 250)


def test_progress_line_is_polis_runs_line_for_ticks_and_for_polled_details() -> None:
    tick = {"status": "running", "ticks_done": 1, "ticks_total": 2, "agent_steps_done": 4, "agent_steps_total": 8,
            "llm_calls": 8, "input_tokens": 900, "output_tokens": 60, "errors": 1}
    assert progress_line(tick) == render_progress(RunProgress.from_json(tick)).rstrip()
    assert progress_line(tick).startswith("[###############...............] tick 1/2 agent-steps 4/8 llm 8 calls 960 tok errors 1")
    detail = {"status": "queued", "progress": {k: tick[k] for k in ("ticks_done", "ticks_total", "agent_steps_done", "agent_steps_total")}}
    assert progress_line(detail).endswith("tick 1/2 agent-steps 4/8 llm 0 calls 0 tok queued")
    assert "tick 0/0 agent-steps 0/0" in progress_line({"status": "running"})


def _sse(seq: int, event: str, data: dict) -> bytes:
    return f"id: {seq}\nevent: {event}\ndata: {json.dumps(data)}\n\n".encode()


class _DroppingStream(httpx.SyncByteStream):
    """Sends some chunks, then fails the way a reset connection does."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self._chunks
        raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")


def test_wait_reopens_a_dropped_stream_with_last_event_id_and_sees_each_event_once() -> None:
    asked_from: list[str | None] = []
    tick = {"ticks_total": 2, "agent_steps_total": 8}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events"):
            asked_from.append(request.headers.get("last-event-id"))
            if len(asked_from) == 1:
                chunks = [_sse(1, "status", {"status": "running"}), _sse(2, "tick", {**tick, "ticks_done": 1, "agent_steps_done": 4})]
                return httpx.Response(200, stream=_DroppingStream(chunks), headers={"content-type": "text/event-stream"})
            body = _sse(3, "tick", {**tick, "ticks_done": 2, "agent_steps_done": 8}) + _sse(4, "final", {"status": "completed"})
            return httpx.Response(200, content=body, headers={"content-type": "text/event-stream"})
        return httpx.Response(200, json=detail("e1"))

    progress = io.StringIO()
    with PolisClient("http://polis.test", transport=httpx.MockTransport(handler)) as client:
        seen = [event.id for event in client.events("e1")]
        assert client.wait("e1", file=progress).status == "completed"
    assert seen == ["1", "2", "3", "4"]
    assert asked_from[:2] == [None, "2"]
    assert "tick 2/2 agent-steps 8/8" in progress.getvalue()


def test_a_stream_that_keeps_ending_without_events_gives_up() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b": keep-alive\n\n", headers={"content-type": "text/event-stream"})

    with PolisClient("http://polis.test", transport=httpx.MockTransport(handler)) as client:
        client_events = client.events("e1")
        with pytest.raises(ConnectionFailedError, match="with no event"):
            next(client_events)


def test_an_events_404_for_a_missing_experiment_is_not_found() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(404, json={"detail": "experiment 'e1' not found"})

    with PolisClient("http://polis.test", transport=httpx.MockTransport(handler)) as client, pytest.raises(NotFoundError):
        client.wait("e1", progress=False)


def test_without_an_event_stream_wait_polls_the_detail_and_draws_its_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("service.client._POLL_S", 0.0)
    # The first answers the check that the experiment exists, the next two the polls.
    details = [detail("e1", "running"), detail("e1", "running"), detail("e1", "completed")]
    details[2]["progress"] = {"ticks_done": 2, "ticks_total": 2, "agent_steps_done": 8, "agent_steps_total": 8}

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/events"):
            return httpx.Response(404, json={"detail": "Not Found"})
        return httpx.Response(200, json=details[0] if len(details) == 1 else details.pop(0))

    progress = io.StringIO()
    with PolisClient("http://polis.test", transport=httpx.MockTransport(handler)) as client:
        final = client.wait("e1", file=progress)
    assert final.status == "completed" and final.progress.agent_steps_done == 8
    assert "tick 0/2 agent-steps 0/8" in progress.getvalue() and "tick 2/2 agent-steps 8/8" in progress.getvalue()


def test_importing_the_client_loads_the_engines_value_modules_and_no_fastapi_dask_or_duckdb() -> None:
    # The client answers with the service's models (service.schemas), which stand on the engine's value modules
    # (statuses, progress, the spec, the result models): those, and nothing that runs a society or a query.
    code = (
        "import sys, service.client\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in {'fastapi', 'starlette', 'dask', 'distributed', 'duckdb'}"
        " or m.startswith(('engine.society', 'engine.storage', 'engine.api', 'engine.llm.', 'service.registry')))\n"
        "assert not heavy, heavy\n"
        "assert {'engine.run_status', 'engine.run_progress', 'engine.results.models', 'service.schemas'} <= set(sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).resolve().parents[2], timeout=60)
