"""Live progress: the event log, and ``GET /experiments/{id}/events`` on a real uvicorn server."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.cluster_options import IN_PROCESS
from engine.run_progress import RunProgress, render_progress
from engine.spec import parse_spec
from service.events import EventHub, EventLog
from service.registry import ExperimentRegistry
from service.routes.events import _stream
from service.settings import ServiceSettings
from tests.service.live import serve, wait_until_final
from tests.service.sse import SseEvent, parse_sse, read_events

TICKS = 3


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    with serve(ServiceSettings(data_dir=tmp_path_factory.mktemp("polis-events"), scheduler=IN_PROCESS)) as client:
        yield client


@pytest.fixture(scope="module")
def streamed(http: httpx.Client, make_spec_data: Callable[..., dict]) -> dict[str, Any]:
    """A three-tick experiment, its event stream read from submission to the end, and its final record."""
    spec = make_spec_data("events")
    spec["steps"] = [{"type": "run", "num_steps": TICKS, "tick": 600}]
    experiment_id = http.post("/experiments", json=spec).json()["id"]
    events = read_events(http, experiment_id)
    return {"id": experiment_id, "events": events, "record": wait_until_final(http, experiment_id)}


def test_the_stream_has_one_tick_event_per_tick_and_ends_with_a_completed_final(streamed: dict[str, Any]) -> None:
    events = streamed["events"]
    ticks = [e.data for e in events if e.name == "tick"]
    assert [t["ticks_done"] for t in ticks] == [1, 2, 3]
    assert [t["agent_steps_done"] for t in ticks] == [4, 8, 12]
    assert {(t["ticks_total"], t["agent_steps_total"]) for t in ticks} == {(TICKS, 4 * TICKS)}
    assert events[-1].name == "final"
    assert events[-1].data["status"] == "completed"
    assert events[-1].data["id"] == streamed["id"] and "spec" not in events[-1].data
    assert [e.data["status"] for e in events if e.name == "status"] == ["queued", "running", "completed"]
    assert [e.id for e in events] == list(range(1, len(events) + 1))


def test_tick_events_count_llm_calls_tokens_cost_and_errors_so_far(streamed: dict[str, Any]) -> None:
    ticks = [e.data for e in streamed["events"] if e.name == "tick"]
    calls = [t["llm_calls"] for t in ticks]
    tokens = [t["input_tokens"] + t["output_tokens"] for t in ticks]
    assert calls == sorted(calls) and calls[0] >= 4  # every agent calls the LLM at least once per tick
    assert tokens == sorted(tokens) and tokens[0] > 0
    assert all(t["errors"] == 0 and t["cost_usd"] == 0.0 for t in ticks)  # the simulated LLM is free
    # The client's progress line is the CLI's, drawn from the event's own fields.
    line = render_progress(RunProgress.from_json(ticks[-1]))
    assert f"tick {TICKS}/{TICKS}" in line and f"agent-steps {4 * TICKS}/{4 * TICKS}" in line and f"llm {calls[-1]} calls" in line


def test_phase_events_say_what_the_run_does_from_its_start_and_the_ended_record_has_none(streamed: dict[str, Any]) -> None:
    events = streamed["events"]
    phases = [(i, e.data) for i, e in enumerate(events) if e.name == "phase"]
    names = [data["phase"] for _, data in phases]
    assert "creating workspaces" in names and names.count("tick") == TICKS and names.count("committing") == TICKS
    first_tick = next(i for i, e in enumerate(events) if e.name == "tick")
    assert phases[0][0] < first_tick  # the stream moves before the first tick ends
    assert {data["status"] for _, data in phases} <= {"starting", "running"}, [(d["phase"], d["status"]) for _, d in phases]
    assert streamed["record"]["progress"]["phase"] is None  # an ended run does nothing


def test_a_finished_experiments_stream_replays_its_history_and_closes(http: httpx.Client, streamed: dict[str, Any]) -> None:
    again = read_events(http, streamed["id"], timeout=10)
    assert again == streamed["events"]


def test_last_event_id_resumes_after_the_event_the_client_saw(http: httpx.Client, streamed: dict[str, Any]) -> None:
    first_tick = next(e for e in streamed["events"] if e.name == "tick")
    rest = read_events(http, streamed["id"], last_event_id=first_tick.id, timeout=10)
    assert rest == [e for e in streamed["events"] if e.id > first_tick.id]
    assert read_events(http, streamed["id"], last_event_id=streamed["events"][-1].id, timeout=10) == []


def test_a_last_event_id_from_an_earlier_process_replays_from_the_start(http: httpx.Client, streamed: dict[str, Any]) -> None:
    assert read_events(http, streamed["id"], last_event_id=10_000, timeout=10) == streamed["events"]


def test_events_of_an_unknown_experiment_are_404(http: httpx.Client) -> None:
    assert http.get("/experiments/0123456789ab/events").status_code == 404


def test_a_restarted_service_streams_a_finished_experiments_status_and_final(
    tmp_path: Path, make_spec_data: Callable[..., dict]
) -> None:
    settings = ServiceSettings(data_dir=tmp_path, scheduler=IN_PROCESS)
    with serve(settings) as http:
        experiment_id = http.post("/experiments", json=make_spec_data("before-restart")).json()["id"]
        wait_until_final(http, experiment_id)
    with serve(settings) as http:
        events = read_events(http, experiment_id, timeout=10)
    assert [(e.id, e.name, e.data["status"]) for e in events] == [(1, "status", "completed"), (2, "final", "completed")]
    assert events[1].data["ticks_done"] == 2


async def test_an_idle_stream_sends_a_heartbeat_comment_and_then_the_next_event() -> None:
    log = EventLog()
    log.append("status", {"status": "running", "error": None})
    stream = _stream(log, 0, heartbeat_s=0.05)
    assert (await anext(stream)).startswith(b"id: 1\nevent: status\n")
    assert await anext(stream) == b": keepalive\n\n"
    log.append("final", {"status": "completed"})
    assert (await anext(stream)).startswith(b"id: 2\nevent: final\n")
    with pytest.raises(StopAsyncIteration):
        await anext(stream)


async def test_an_event_appended_from_another_thread_wakes_a_waiting_reader() -> None:
    log = EventLog()
    timer = threading.Timer(0.05, log.append, args=("tick", {"ticks_done": 1}))
    timer.start()
    # Woken, not timed out (False): the bound only turns a reader that is never woken into a failure.
    assert await log.wait(0, timeout=120) is True
    assert [e.data for e in log.since(0)] == [{"ticks_done": 1}]
    assert await log.wait(1, timeout=0.01) is False


def test_the_log_keeps_only_its_newest_events_but_keeps_numbering() -> None:
    log = EventLog(max_events=3)
    for tick in range(1, 6):
        log.append("tick", {"ticks_done": tick})
    assert [e.seq for e in log.since(0)] == [3, 4, 5]
    assert [e.seq for e in log.since(4)] == [5]
    assert log.last_seq == 5 and not log.ended_at(5)



def test_stopping_the_service_with_an_open_stream_does_not_wait_for_the_experiment(
    tmp_path: Path, make_spec_data: Callable[..., dict]
) -> None:
    spec = make_spec_data("endless")
    spec["steps"] = [{"type": "run", "num_steps": 1000, "tick": 60}]
    seen: list[SseEvent | str] = []
    settings = ServiceSettings(data_dir=tmp_path, scheduler=IN_PROCESS)
    with serve(settings) as http:
        experiment_id = http.post("/experiments", json=spec).json()["id"]

        def read() -> None:
            with contextlib.suppress(httpx.HTTPError), httpx.stream(
                "GET", f"{http.base_url}/experiments/{experiment_id}/events", timeout=120
            ) as response:
                seen.extend(parse_sse(response.iter_lines()))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        deadline = time.monotonic() + 120  # only bounds a hang
        while not any(isinstance(e, SseEvent) and e.name == "tick" for e in seen):
            assert time.monotonic() < deadline, seen
            time.sleep(0.05)
    # The service stopped (serve() bounds that) without waiting for the experiment: the run was cancelled, far
    # short of its 1000 ticks, and the stream cut. (Within the 5 s graceful shutdown and a few more on an idle machine:
    # a speed goal, not behaviour.)
    reader.join(timeout=120)  # only bounds a hang
    assert not reader.is_alive()
    on_disk = json.loads((tmp_path / "experiments" / f"{experiment_id}.json").read_text())
    assert on_disk["status"] == "interrupted" and on_disk["resume_on_start"] is True
    assert on_disk["ticks_done"] < 1000


def test_the_hub_drops_the_oldest_ended_logs_past_its_limit_and_keeps_live_ones(tmp_path: Path, make_spec_data) -> None:
    registry = ExperimentRegistry(tmp_path)
    spec = parse_spec(make_spec_data("hub"))
    live = registry.create(spec)
    ended = [registry.update(registry.create(spec).id, status="completed") for _ in range(3)]
    hub = EventHub(max_logs=2)
    hub.open(live)
    hub.tick(live.id, {"ticks_done": 1})
    logs = [hub.open(record) for record in ended]
    assert [e.name for e in hub.open(live).since(0)] == ["status", "tick"]  # live: kept with its history
    assert hub.open(ended[-1]) is logs[-1]  # the newest ended one is kept
    again = hub.open(ended[0])  # the oldest was dropped: opened afresh from its record
    assert again is not logs[0] and [e.name for e in again.since(0)] == ["status", "final"]
