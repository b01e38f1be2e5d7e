"""``POST /experiments/{id}/fidelity`` on a real uvicorn: a survey experiment (inline rows and codebook, on the
rehearsal model) scored over REST and through polis.connect; what cannot be scored is a 422 that names why; what
one owner asks is bounded (resamples, repeated fields, scorings at once, time) while another owner is served."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

import polis
from engine.cluster_options import IN_PROCESS
from service.admission.auth import create_token
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


def test_resamples_over_the_cap_and_a_field_named_twice_are_422_at_the_field(http: httpx.Client) -> None:
    experiment = finished(http, rehearsal_spec(0.0, survey(30)))
    many = http.post(f"/experiments/{experiment}/fidelity", json={"bootstrap": 2001})
    assert many.status_code == 422 and many.json()["detail"][0]["loc"] == ["body", "bootstrap"]
    assert "2000" in many.json()["detail"][0]["msg"]
    twice = http.post(f"/experiments/{experiment}/fidelity", json={"by": ["party", "party"], "bootstrap": 10})
    assert twice.status_code == 422, twice.text
    assert twice.json()["detail"][0]["loc"] == ["body", "by", 1] and "'party' is named again" in twice.text
    assert http.post(f"/experiments/{experiment}/fidelity", json={"bootstrap": 2000, "by": ["party"]}).status_code == 200


def test_a_regression_is_fitted_beside_the_figures_and_bad_formulas_are_422_at_regression_formula(
        http: httpx.Client) -> None:
    experiment = finished(http, rehearsal_spec(0.0, survey(120)))
    fitted = http.post(f"/experiments/{experiment}/fidelity",
                       json={"bootstrap": 10, "regression": {"formula": "rate ~ party + trust"}})
    assert fitted.status_code == 200, fitted.text
    regression = fitted.json()["regression"]
    assert regression["formula"] == "rate ~ party + trust" and regression["family"] == "ols" and regression["n"] == 120
    assert [c["term"] for c in regression["coefficients"]] == ["Intercept", "party", "trust"]
    for c in regression["coefficients"]:  # noise 0: the simulated answers are the real ones
        assert c["real"] == c["simulated"] and c["sign_agrees"] and c["differs"] is False
    assert regression["share_differ"] == 0 and regression["share_sign_flipped"] == 0
    logit = http.post(f"/experiments/{experiment}/fidelity",
                      json={"bootstrap": 10, "regression": {"formula": "trust ~ C(party)", "family": "logit"}})
    assert logit.status_code == 200, logit.text
    assert [c["term"] for c in logit.json()["regression"]["coefficients"]] == ["Intercept", "party=right"]
    rows = http.post(f"/experiments/{experiment}/sql", json={"sql": "SELECT count(*) FROM regression_fidelity"}).json()
    assert rows["rows"] == [[5]]  # both fits are the experiment's regression_fidelity dataset

    def refused(regression: dict) -> dict:
        answer = http.post(f"/experiments/{experiment}/fidelity", json={"bootstrap": 10, "regression": regression})
        assert answer.status_code == 422, answer.text
        return answer.json()["detail"][0]

    unknown = refused({"formula": "rate ~ party + age"})
    assert unknown["loc"] == ["body", "regression", "formula"] and "'age' is neither a persona field" in unknown["msg"]
    syntax = refused({"formula": "rate ~ party * trust"})  # pydantic's, before the run is read
    assert syntax["loc"] == ["body", "regression", "formula"] and "'party * trust' is no column" in syntax["msg"]
    family = refused({"formula": "rate ~ party", "family": "logit"})
    assert family["loc"] == ["body", "regression", "family"] and "binary target" in family["msg"]
    assert refused({"formula": "rate ~ party", "famliy": "ols"})["loc"] == ["body", "regression", "famliy"]
    small = finished(http, rehearsal_spec(0.0, survey(25)))
    few = http.post(f"/experiments/{small}/fidelity", json={"regression": {"formula": "rate ~ party + trust"}})
    assert few.status_code == 422 and few.json()["detail"][0]["loc"] == ["body", "regression", "formula"]
    assert "at least 10 respondents per coefficient (30)" in few.text


def test_a_regression_alone_is_fitted_without_touching_the_figures_and_a_remote_run_returns_the_local_frame(
        http: httpx.Client) -> None:
    experiment = finished(http, rehearsal_spec(0.0, survey(120)))
    assert http.post(f"/experiments/{experiment}/fidelity", json={"bootstrap": 10}).status_code == 200
    figures = http.post(f"/experiments/{experiment}/sql", json={"sql": "SELECT * FROM fidelity ORDER BY ALL"}).json()["rows"]
    fitted = http.post(f"/experiments/{experiment}/regression", json={"regression": {"formula": "rate ~ party + trust"}})
    assert fitted.status_code == 200, fitted.text
    assert [c["term"] for c in fitted.json()["coefficients"]] == ["Intercept", "party", "trust"] and fitted.json()["n"] == 120
    assert http.post(f"/experiments/{experiment}/sql", json={"sql": "SELECT * FROM fidelity ORDER BY ALL"}).json()["rows"] == figures
    bad = http.post(f"/experiments/{experiment}/regression", json={"regression": {"formula": "rate ~ party + age"}})
    assert bad.status_code == 422 and bad.json()["detail"][0]["loc"] == ["body", "regression", "formula"]

    with polis.connect(str(http.base_url)) as session:
        frame = session.open_run(experiment).regression_fidelity("rate ~ party + trust")
    assert list(frame["term"]) == ["Intercept", "party", "trust"] and frame.attrs["n"] == 120
    assert frame.attrs["share_differ"] == 0 and (frame["real"] == frame["simulated"]).all()


@pytest.fixture(scope="module")
def two_owners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, httpx.Client], Any]]:
    """A service with two owners (lab-a, lab-b), one scoring each at a time, and each owner's survey experiment."""
    path = tmp_path_factory.mktemp("polis-fidelity-tokens") / "tokens.json"
    tokens = {owner: create_token(path, owner) for owner in ("lab-a", "lab-b")}
    settings = ServiceSettings(data_dir=tmp_path_factory.mktemp("polis-fidelity-owners"), scheduler=IN_PROCESS,
                               auth_tokens=path, fidelity_max_concurrent_per_owner=1, fidelity_max_concurrent=2)
    apps: list[Any] = []
    with serve(settings, token=tokens["lab-a"], apps=apps) as lab_a, \
            httpx.Client(base_url=lab_a.base_url, timeout=30, headers={"Authorization": f"Bearer {tokens['lab-b']}"}) as lab_b:
        yield {"lab-a": lab_a, "lab-b": lab_b}, apps[0].state.polis


def test_an_owner_past_its_concurrent_scorings_gets_a_429_while_another_owner_is_scored(
        two_owners: tuple[dict[str, httpx.Client], Any]) -> None:
    clients, state = two_owners
    mine, theirs = (finished(clients[owner], rehearsal_spec(0.0, survey(30))) for owner in ("lab-a", "lab-b"))
    with state.fidelity_work.slots.hold("lab-a"):  # lab-a's one scoring is running
        refused = clients["lab-a"].post(f"/experiments/{mine}/fidelity", json={"bootstrap": 20})
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "1"
        assert "POLIS_FIDELITY_MAX_CONCURRENT_PER_OWNER=1" in refused.json()["detail"]
        served = clients["lab-b"].post(f"/experiments/{theirs}/fidelity", json={"bootstrap": 20})
        assert served.status_code == 200, served.text
        assert clients["lab-b"].get(f"/experiments/{theirs}/datasets").status_code == 200
        with state.fidelity_work.slots.hold("lab-c"):  # a third owner's: the service's two scorings are running
            full = clients["lab-b"].post(f"/experiments/{theirs}/fidelity", json={"bootstrap": 20})
            assert full.status_code == 429 and "POLIS_FIDELITY_MAX_CONCURRENT=2" in full.json()["detail"]
    assert clients["lab-a"].post(f"/experiments/{mine}/fidelity", json={"bootstrap": 20}).status_code == 200
    assert state.fidelity_work.slots.held() == 0  # every scoring gave its slot back


def test_a_scoring_past_its_time_limit_is_stopped_with_a_422_naming_it_and_writes_nothing(
        tmp_path_factory: pytest.TempPathFactory) -> None:
    data = tmp_path_factory.mktemp("polis-fidelity-timeout")
    # A millisecond: the scoring's first checks (after it reads the answers, before each resample) find it spent.
    apps: list[Any] = []
    with serve(ServiceSettings(data_dir=data, scheduler=IN_PROCESS, fidelity_timeout_s=0.001), apps=apps) as http:
        experiment = finished(http, rehearsal_spec(0.0, survey(120)))
        stopped = http.post(f"/experiments/{experiment}/fidelity", json={"bootstrap": 2000, "by": ["party"]})
        assert stopped.status_code == 422, stopped.text
        assert stopped.json()["detail"] == ("the fidelity scoring ran past its 0.001 s time limit "
                                            "(POLIS_FIDELITY_TIMEOUT_S) and was stopped")
        assert apps[0].state.polis.fidelity_work.slots.held() == 0
        datasets = http.get(f"/experiments/{experiment}/datasets").json()["datasets"]
        assert "fidelity" not in {dataset["name"] for dataset in datasets}  # nothing was written
    assert not list(Path(data).rglob("fidelity-*"))
