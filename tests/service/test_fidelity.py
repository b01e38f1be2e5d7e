"""``POST /experiments/{id}/fidelity`` on a real uvicorn: a survey experiment (inline rows and codebook, on the
rehearsal model) scored over REST and through polis.connect; what cannot be scored is a 422 that names why."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

import polis
from engine.cluster_options import IN_PROCESS
from service.settings import ServiceSettings
from tests.engine.fidelity.test_rehearsal_run import rehearsal_spec, survey
from tests.service.live import serve, wait_until_final


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    settings = ServiceSettings(data_dir=tmp_path_factory.mktemp("polis-fidelity"), scheduler=IN_PROCESS)
    with serve(settings) as client:
        yield client


def finished(http: httpx.Client, spec: dict) -> str:
    posted = http.post("/experiments", json=spec)
    assert posted.status_code == 201, posted.text
    assert len(posted.content) < 2000  # the answer is an id and a summary, never the rows it was given
    assert wait_until_final(http, posted.json()["id"])["status"] == "completed"
    return posted.json()["id"]


def test_a_survey_experiment_is_scored_over_rest_and_through_polis_connect(http: httpx.Client) -> None:
    experiment = finished(http, rehearsal_spec(0.0, survey(120)))
    scored = http.post(f"/experiments/{experiment}/fidelity", json={"by": ["party"], "bootstrap": 50})
    assert scored.status_code == 200, scored.text
    figures = {(f["item"], f["metric"], f["group"]): f for f in scored.json()["figures"]}
    assert figures[("rate", "accuracy", None)]["value"] == 1.0 and figures[("trust", "tvd", None)]["value"] == 0.0
    assert figures[("rate", "accuracy", "left")]["group_by"] == "party"
    rows = http.post(f"/experiments/{experiment}/sql", json={"sql": "SELECT count(*) AS n FROM fidelity"}).json()["rows"]
    assert rows == [[len(figures)]]  # the figures are the experiment's fidelity dataset too

    with polis.connect(str(http.base_url)) as session:
        frame = session.open_run(experiment).fidelity(bootstrap=20)
    assert set(frame["metric"]) >= {"coverage", "tvd", "jsd", "accuracy", "wasserstein", "spearman"}


def test_what_cannot_be_scored_is_a_422_naming_why(http: httpx.Client) -> None:
    experiment = finished(http, rehearsal_spec(0.0, survey(30)))
    unknown = http.post(f"/experiments/{experiment}/fidelity", json={"by": ["age"]})
    assert unknown.status_code == 422 and "persona field 'age'" in unknown.text
    typo = http.post(f"/experiments/{experiment}/fidelity", json={"bootsrap": 10})
    assert typo.status_code == 422 and "bootsrap" in typo.text
    plain = finished(http, {"name": "plain", "agents": [{"id": 0}], "steps": [
        {"type": "questionnaire", "questionnaire_id": "q", "questions": [{"id": "x", "prompt": "X?"}]}]})
    none = http.post(f"/experiments/{plain}/fidelity", json={})
    assert none.status_code == 422 and "survey populations" in none.text
    assert http.post("/experiments/nosuch/fidelity", json={}).status_code == 404


def test_the_route_is_in_the_openapi_document_with_its_errors(http: httpx.Client) -> None:
    operation = http.get("/openapi.json").json()["paths"]["/experiments/{experiment_id}/fidelity"]["post"]
    assert {"200", "404", "422"} <= set(operation["responses"])
