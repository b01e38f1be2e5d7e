"""Quotas across requests on a real uvicorn server, run in-process: added steps, sweep cells, LLM calls per day;
idempotent added steps; answers that carry the id and a summary and never a server path."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.cluster_options import IN_PROCESS
from service.admission.auth import create_token
from service.settings import ServiceSettings
from tests.service.live import serve, wait_until_final

#: lab-a may make 60 LLM calls a day: the small spec (4 agents x 2 ticks) makes about 20, so a few runs use it up.
DAILY_CALLS = 60


def _question(qid: str) -> dict[str, Any]:
    return {"type": "questionnaire", "questionnaire_id": qid,
            "questions": [{"id": "trust", "prompt": "Trust in neighbours (0-10)?", "response_type": "integer"}]}


@dataclass
class Live:
    http: httpx.Client
    data_dir: Path
    lab_a: dict[str, str]
    lab_b: dict[str, str]


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Live]:
    config = tmp_path_factory.mktemp("quota-config")
    tokens = config / "tokens.json"
    lab_a, lab_b = create_token(tokens, "lab-a"), create_token(tokens, "lab-b")
    grants = config / "grants.json"
    grants.write_text(json.dumps({"quotas": {"lab-a": {"max_llm_calls_per_day": DAILY_CALLS, "max_added_steps": 3,
                                                       "max_sweep_cells": 5}}}), encoding="utf-8")
    settings = ServiceSettings(data_dir=tmp_path_factory.mktemp("quota-data"), scheduler=IN_PROCESS,
                               auth_tokens=tokens, grants_file=grants)
    with serve(settings, token=lab_a) as http:
        yield Live(http, settings.data_dir, {"Authorization": f"Bearer {lab_a}"}, {"Authorization": f"Bearer {lab_b}"})


@pytest.fixture(scope="module")
def finished(live: Live, make_spec_data: Callable[..., dict[str, Any]]) -> str:
    response = live.http.post("/experiments", json=make_spec_data("quota-first"))
    assert response.status_code == 201, response.text
    assert wait_until_final(live.http, response.json()["id"])["status"] == "completed"
    return str(response.json()["id"])


def test_the_submit_answer_is_the_id_and_a_summary_and_no_answer_names_a_server_path(
    live: Live, finished: str, make_spec_data: Callable[..., dict[str, Any]]
) -> None:
    spec = make_spec_data("summary")
    spec["population"] = [{"count": 300, "profile_template": {"name": "P{i}", "bio": "x" * 200}}]
    response = live.http.post("/experiments", json=spec, headers=live.lab_b)
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["id"] and body["status"] == "queued" and body["progress"]["agent_steps_total"] == 2 * 304
    assert body["report"] == f"/experiments/{body['id']}/report" and body["events"] == f"/experiments/{body['id']}/events"
    assert "spec" not in body and len(response.content) < 2_000  # the 300-member population is not echoed
    assert live.http.post(f"/experiments/{body['id']}/cancel", headers=live.lab_b).status_code == 202

    detail = live.http.get(f"/experiments/{finished}").json()
    assert "run_dir" not in detail and detail["spec"]["name"] == "quota-first"
    for text in (json.dumps(detail), live.http.get("/experiments").text):
        assert str(live.data_dir) not in text
    views = live.http.post(f"/experiments/{finished}/sql", json={"sql": "SELECT sql FROM duckdb_views()"})
    assert views.status_code == 400 and "server's paths" in views.text
    assert str(live.data_dir) not in views.text


def test_a_steps_request_over_max_added_steps_is_refused_naming_the_quota(live: Live, finished: str) -> None:
    response = live.http.post(f"/experiments/{finished}/steps", json={"steps": [_question(f"q{i}") for i in range(4)]})
    assert response.status_code == 422, response.text
    [detail] = response.json()["detail"]
    assert detail["loc"] == ["body", "steps"]
    assert "4 steps in one request" in detail["msg"] and "max_added_steps" in detail["msg"] and "at most 3" in detail["msg"]
    assert live.http.get(f"/experiments/{finished}").json()["spec"]["steps"] == [
        {"type": "run", "num_steps": 2, "tick": 3600}]


def test_a_sweep_over_max_sweep_cells_is_refused_naming_the_quota(
    live: Live, make_spec_data: Callable[..., dict[str, Any]]
) -> None:
    response = live.http.post("/experiments", json={**make_spec_data("cells"), "sweep": {"replications": 6}})
    assert response.status_code == 422, response.text
    [detail] = response.json()["detail"]
    assert detail["loc"] == ["body", "sweep"] and "6 cells" in detail["msg"] and "max_sweep_cells" in detail["msg"]


def test_added_steps_with_an_idempotency_key_are_added_once(live: Live, finished: str) -> None:
    key = {"Idempotency-Key": "steps-1"}
    body = {"steps": [_question("once")]}
    first = live.http.post(f"/experiments/{finished}/steps", json=body, headers=key)
    assert first.status_code == 202, first.text
    assert "spec" not in first.json() and "Idempotent-Replayed" not in first.headers
    assert wait_until_final(live.http, finished)["status"] == "completed"
    again = live.http.post(f"/experiments/{finished}/steps", json=body, headers=key)
    assert again.status_code == 202 and again.headers["Idempotent-Replayed"] == "true"
    assert again.json()["status"] == "completed"  # not queued again
    other = live.http.post(f"/experiments/{finished}/steps", json={"steps": [_question("other")]}, headers=key)
    assert other.status_code == 409 and "steps-1" in other.text
    steps = live.http.get(f"/experiments/{finished}").json()["spec"]["steps"]
    assert [s.get("questionnaire_id") for s in steps] == [None, "once"]
    answers = live.http.post(f"/experiments/{finished}/sql", json={"sql": "SELECT count(*) FROM questionnaire_answers"})
    assert answers.json()["rows"] == [[4]]


def test_an_owner_past_the_daily_llm_calls_is_answered_429_with_what_is_left_and_others_are_not(
    live: Live, finished: str, make_spec_data: Callable[..., dict[str, Any]]
) -> None:
    for index in range(10):  # until lab-a's calls today pass DAILY_CALLS
        response = live.http.post("/experiments", json=make_spec_data(f"spend-{index}"))
        if response.status_code == 429:
            break
        assert response.status_code == 201, response.text
        wait_until_final(live.http, response.json()["id"])
    assert response.status_code == 429, "the daily quota never refused a submit"
    assert 1 <= int(response.headers["Retry-After"]) <= 86_401
    message = response.json()["detail"]
    assert "max_llm_calls_per_day" in message and "has 0 left" in message and "00:00 UTC" in message

    steps = live.http.post(f"/experiments/{finished}/steps", json={"steps": [_question("late")]})
    assert steps.status_code == 429 and "needs at least 4" in steps.json()["detail"]
    fork = live.http.post(f"/experiments/{finished}/fork", json={"at_step": 1})
    assert fork.status_code == 429
    with httpx.Client(base_url=live.http.base_url, headers=live.lab_b, timeout=30) as lab_b:
        other = lab_b.post("/experiments", json=make_spec_data("lab-b-still-runs"))
        assert other.status_code == 201, other.text
        assert wait_until_final(lab_b, other.json()["id"])["status"] == "completed"


def test_added_steps_build_and_count_the_spec_off_the_event_loop(live: Live, finished: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Building a million-member spec and dealing it to tiers takes seconds: on the loop, every owner's request waits.
    import asyncio

    from service.routes import steps

    where: list[str] = []

    def counting(spec: Any) -> tuple[int, int]:
        try:
            asyncio.get_running_loop()
            where.append("event loop")
        except RuntimeError:
            where.append("thread")
        return real(spec)

    real = steps.count_llm_callers
    monkeypatch.setattr(steps, "count_llm_callers", counting)
    response = live.http.post(f"/experiments/{finished}/steps", json={"steps": [_question("off-loop")]})
    # counted before the daily-calls check: so whether lab-a's calls today are left (202) or used up by the tests
    # before this one (429)
    assert response.status_code in (202, 429), response.text
    assert where == ["thread"]
    if response.status_code == 202:
        assert wait_until_final(live.http, finished)["status"] == "completed"
