"""``Idempotency-Key`` on ``POST /experiments`` over a real uvicorn: a retry, or many at once, makes one experiment;
another body under the key is a 409; keys are per owner (the registry keeps them across restarts:
``test_experiment_registry.py``)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from engine.cluster_options import IN_PROCESS
from service.admission.auth import create_token
from service.settings import ServiceSettings
from tests.service.live import serve


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    tokens = tmp_path_factory.mktemp("polis-idempotency-tokens") / "tokens.json"
    a, b = create_token(tokens, "lab-a"), create_token(tokens, "lab-b")
    # A burst of 32 retries is checked at once here; the admission slots' own 429 is tested in test_admission_work.py.
    settings = ServiceSettings(data_dir=tmp_path_factory.mktemp("polis-idempotency"), scheduler=IN_PROCESS, auth_tokens=tokens,
                               admission_max_concurrent_per_owner=32, admission_max_concurrent=32)
    with serve(settings, token=a) as http:
        yield {"http": http, "b": {"Authorization": f"Bearer {b}"}}


def _ids(http: httpx.Client, name: str, headers: dict[str, str] | None = None) -> list[str]:
    listed = http.get("/experiments", headers=headers).json()["experiments"]
    return [e["id"] for e in listed if e["name"] == name]


def test_a_retry_with_the_same_key_and_body_returns_the_same_experiment(service: dict[str, Any], make_spec_data: Any) -> None:
    http = service["http"]
    spec = make_spec_data("idempotent-retry")
    first = http.post("/experiments", json=spec, headers={"Idempotency-Key": "retry-1"})
    again = http.post("/experiments", json=spec, headers={"Idempotency-Key": "retry-1"})
    assert (first.status_code, again.status_code) == (201, 201), again.text
    assert again.json()["id"] == first.json()["id"] and again.headers["Location"] == first.headers["Location"]
    assert again.headers["Idempotent-Replayed"] == "true" and "Idempotent-Replayed" not in first.headers
    assert _ids(http, "idempotent-retry") == [first.json()["id"]]


def test_the_same_key_with_another_body_is_a_409(service: dict[str, Any], make_spec_data: Any) -> None:
    http = service["http"]
    assert http.post("/experiments", json=make_spec_data("key-one"), headers={"Idempotency-Key": "k-409"}).status_code == 201
    other = http.post("/experiments", json=make_spec_data("key-two"), headers={"Idempotency-Key": "k-409"})
    assert other.status_code == 409 and "k-409" in other.json()["detail"]
    assert _ids(http, "key-two") == []


def test_concurrent_submits_with_one_key_make_one_experiment(service: dict[str, Any], make_spec_data: Any) -> None:
    http = service["http"]
    spec = make_spec_data("idempotent-burst")

    def submit(_: int) -> httpx.Response:
        return httpx.post(f"{http.base_url}/experiments", json=spec, headers={**http.headers, "Idempotency-Key": "burst"}, timeout=60)

    with ThreadPoolExecutor(max_workers=16) as pool:
        answers = list(pool.map(submit, range(32)))
    assert {a.status_code for a in answers} == {201}
    assert len({a.json()["id"] for a in answers}) == 1
    assert _ids(http, "idempotent-burst") == [answers[0].json()["id"]]


def test_keys_belong_to_their_owner(service: dict[str, Any], make_spec_data: Any) -> None:
    http = service["http"]
    spec = make_spec_data("per-owner")
    mine = http.post("/experiments", json=spec, headers={"Idempotency-Key": "shared"})
    theirs = http.post("/experiments", json=spec, headers={"Idempotency-Key": "shared", **service["b"]})
    assert (mine.status_code, theirs.status_code) == (201, 201)
    assert mine.json()["id"] != theirs.json()["id"]


def test_an_empty_or_overlong_key_is_a_422(service: dict[str, Any], make_spec_data: Any) -> None:
    for key in ("", "k" * 256):
        response = service["http"].post("/experiments", json=make_spec_data("bad-key"), headers={"Idempotency-Key": key})
        assert response.status_code == 422, (key[:5], response.text)

