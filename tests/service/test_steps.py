"""``POST /experiments/{id}/steps`` on a real uvicorn: a questionnaire, then an ask step, on a finished run add
their answers to the run's datasets and leave the old rows alone; run steps, sweeps and live experiments are refused."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from engine.cluster_options import IN_PROCESS
from service.settings import ServiceSettings
from tests.service.live import serve, wait_until_final

QUESTIONNAIRE = {
    "type": "questionnaire", "questionnaire_id": "after",
    "questions": [{"id": "mood", "prompt": "How is your mood (0-10)?", "response_type": "integer", "min": 0, "max": 10}],
}


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    with serve(ServiceSettings(data_dir=tmp_path_factory.mktemp("polis-steps"), scheduler=IN_PROCESS)) as client:
        yield client


@pytest.fixture(scope="module")
def finished(http: httpx.Client, make_spec_data: Callable[..., dict]) -> str:
    response = http.post("/experiments", json=make_spec_data("steps"))
    assert response.status_code == 201, response.text
    assert wait_until_final(http, response.json()["id"])["status"] == "completed"
    return str(response.json()["id"])


def rows(http: httpx.Client, experiment: str, query: str) -> list[list[Any]]:
    response = http.post(f"/experiments/{experiment}/sql", json={"sql": query})
    assert response.status_code == 200, response.text
    return list(response.json()["rows"])


def test_a_questionnaire_then_an_ask_on_a_finished_run_add_answers_and_keep_the_old_rows(http: httpx.Client, finished: str) -> None:
    actions = rows(http, finished, "SELECT * EXCLUDE (t) FROM actions ORDER BY agent_id, step")
    posted = http.post(f"/experiments/{finished}/steps", json={"steps": [QUESTIONNAIRE]})
    assert posted.status_code == 202, posted.text
    assert posted.json()["status"] == "queued"
    body = wait_until_final(http, finished)
    assert body["status"] == "completed", body
    assert [s["type"] for s in body["spec"]["steps"]] == ["run", "questionnaire"]
    answers = rows(http, finished, "SELECT questionnaire_id, step_index, step, agent_id, question_id FROM questionnaire_answers ORDER BY agent_id")
    assert answers == [["after", 1, 2, agent, "mood"] for agent in range(4)]

    asked = http.post(f"/experiments/{finished}/steps", json={"steps": [{"type": "ask", "question": "Who is the oldest?"}]})
    assert asked.status_code == 202, asked.text
    assert wait_until_final(http, finished)["status"] == "completed"
    assert rows(http, finished, "SELECT step_index, kind, text FROM society_queries") == [[2, "ask", "Who is the oldest?"]]
    assert rows(http, finished, "SELECT count(*) FROM questionnaire_answers") == [[4]]
    assert rows(http, finished, "SELECT * EXCLUDE (t) FROM actions ORDER BY agent_id, step") == actions
    names = {d["name"] for d in http.get(f"/experiments/{finished}/datasets").json()["datasets"]}
    assert {"actions", "questionnaire_answers", "society_queries"} <= names


def test_a_run_step_is_refused_naming_its_type(http: httpx.Client, finished: str) -> None:
    response = http.post(f"/experiments/{finished}/steps",
                         json={"steps": [{"type": "ask", "question": "x"}, {"type": "run", "num_steps": 1}]})
    assert response.status_code == 422, response.text
    assert response.json()["detail"][0]["loc"] == ["body", "steps", 1, "type"]


def test_invalid_or_empty_steps_are_422_and_a_missing_experiment_404(http: httpx.Client, finished: str) -> None:
    assert http.post(f"/experiments/{finished}/steps", json={"steps": []}).status_code == 422
    bad = http.post(f"/experiments/{finished}/steps", json={"steps": [{"type": "questionnaire", "questionnaire_id": "q"}]})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"][:3] == ["body", "steps", 0]
    unknown = http.post(f"/experiments/{finished}/steps", json={"steps": [{**QUESTIONNAIRE, "target_agent_ids": [9]}]})
    assert unknown.status_code == 422 and unknown.json()["detail"][0]["loc"] == ["body", "steps", 0, "target_agent_ids", 0]
    assert http.post("/experiments/000000000000/steps", json={"steps": [QUESTIONNAIRE]}).status_code == 404


def test_a_live_experiment_is_409_and_a_sweep_422(http: httpx.Client, make_spec_data: Callable[..., dict]) -> None:
    live = http.post("/experiments", json={**make_spec_data("steps-live"), "sweep": {"replications": 2}}).json()["id"]
    busy = http.post(f"/experiments/{live}/steps", json={"steps": [QUESTIONNAIRE]})
    assert busy.status_code == 409, busy.text
    assert "cancel it first" in busy.json()["detail"]
    http.post(f"/experiments/{live}/cancel")
    assert wait_until_final(http, live)["status"] in {"cancelled", "completed"}
    sweep = http.post(f"/experiments/{live}/steps", json={"steps": [QUESTIONNAIRE]})
    assert sweep.status_code == 422 and "sweep" in sweep.json()["detail"][0]["msg"]


def test_an_as_of_questionnaire_answers_from_a_kept_tick_and_a_future_tick_is_422(http: httpx.Client, finished: str) -> None:
    late = http.post(f"/experiments/{finished}/steps", json={"steps": [{**QUESTIONNAIRE, "as_of_step": 9}]})
    assert late.status_code == 422, late.text
    assert late.json()["detail"][0]["loc"] == ["body", "steps", 0, "as_of_step"]
    posted = http.post(f"/experiments/{finished}/steps",
                       json={"steps": [{**QUESTIONNAIRE, "questionnaire_id": "then", "as_of_step": 1}]})
    assert posted.status_code == 202, posted.text
    assert wait_until_final(http, finished)["status"] == "completed"
    then = rows(http, finished, "SELECT step, as_of_step, count(*) FROM questionnaire_answers "
                                "WHERE questionnaire_id = 'then' GROUP BY ALL")
    assert then == [[2, 1, 4]]


def test_an_as_of_step_on_a_tick_no_longer_kept_is_409_and_the_run_stays_as_it_was(
    http: httpx.Client, make_spec_data: Callable[..., dict]
) -> None:
    response = http.post("/experiments", json={**make_spec_data("steps-keep0"), "snapshots": {"keep": 0}})
    assert response.status_code == 201, response.text
    experiment = response.json()["id"]
    assert wait_until_final(http, experiment)["status"] == "completed"
    refused = http.post(f"/experiments/{experiment}/steps", json={"steps": [{**QUESTIONNAIRE, "as_of_step": 1}]})
    assert refused.status_code == 409, refused.text
    assert "snapshots.keep" in refused.json()["detail"]
    body = http.get(f"/experiments/{experiment}").json()
    assert body["status"] == "completed" and [s["type"] for s in body["spec"]["steps"]] == ["run"]
