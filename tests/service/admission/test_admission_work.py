"""Checking submitted specs is work bounded per owner: on the intake's own threads, a few of one owner's at once, and
a sweep of 10,000 values checked without a parse of the whole spec per value (on 90329b4: ~500 s of service CPU a
submit, and six of them kept every owner's submits waiting on the shared thread pool)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.cluster_options import IN_PROCESS
from service.admission.auth import create_token
from service.settings import ServiceSettings
from tests.service.live import serve

ROWS = 20_000


@pytest.fixture(scope="module")
def two_owners(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, httpx.Client], Any]]:
    config = tmp_path_factory.mktemp("admission-config")
    inputs = config / "inputs"
    inputs.mkdir()
    (inputs / "people.csv").write_text("name,age\n" + "".join(f"P{i},{20 + i % 60}\n" for i in range(ROWS)))
    tokens = {owner: create_token(config / "tokens.json", owner) for owner in ("lab-a", "lab-b")}
    settings = ServiceSettings(data_dir=tmp_path_factory.mktemp("admission-data"), scheduler=IN_PROCESS,
                               auth_tokens=config / "tokens.json", input_dirs=(inputs,),
                               admission_max_concurrent_per_owner=2, admission_max_concurrent=3)
    apps: list[Any] = []
    with serve(settings, token=tokens["lab-a"], apps=apps) as lab_a, \
            httpx.Client(base_url=lab_a.base_url, timeout=60, headers={"Authorization": f"Bearer {tokens['lab-b']}"}) as lab_b:
        yield {"lab-a": lab_a, "lab-b": lab_b}, apps[0].state.polis


def test_a_sweep_of_ten_thousand_values_over_a_large_table_is_checked_and_accepted(
        two_owners: tuple[dict[str, httpx.Client], Any], make_spec_data: Callable[..., dict[str, Any]]) -> None:
    clients, state = two_owners
    spec = {**make_spec_data("wide-sweep"), "population": [{"from": "people.csv", "count": 2}],
            "sweep": {"grid": {"llm.default.options.temperature": [round(i / 10_000, 4) for i in range(10_000)]}}}
    spec.pop("agents", None)
    spec["steps"] = [{"type": "run", "num_steps": 1, "tick": 600}]
    posted = clients["lab-a"].post("/experiments", content=json.dumps(spec), timeout=60)
    assert posted.status_code == 201, posted.text
    clients["lab-a"].post(f"/experiments/{posted.json()['id']}/cancel")
    assert state.intake.work.slots.held() == 0


def test_an_owner_past_its_concurrent_checks_gets_a_429_and_another_owners_submit_is_checked(
        two_owners: tuple[dict[str, httpx.Client], Any], make_spec_data: Callable[..., dict[str, Any]]) -> None:
    clients, state = two_owners
    with state.intake.work.slots.hold("lab-a"), state.intake.work.slots.hold("lab-a"):  # two of lab-a's being checked
        refused = clients["lab-a"].post("/experiments", json=make_spec_data("third"))
        assert refused.status_code == 429, refused.text
        assert "POLIS_ADMISSION_MAX_CONCURRENT_PER_OWNER=2" in refused.json()["detail"]
        served = clients["lab-b"].post("/experiments", json=make_spec_data("other-owner"))
        assert served.status_code == 201, served.text
        with state.intake.work.slots.hold("lab-c"):  # the service's three checks are all running
            full = clients["lab-b"].post("/experiments", json=make_spec_data("full"))
            assert full.status_code == 429 and "POLIS_ADMISSION_MAX_CONCURRENT=3" in full.json()["detail"]
    assert clients["lab-a"].post("/experiments", json=make_spec_data("after")).status_code == 201
    assert state.intake.work.slots.held() == 0


def test_a_check_past_its_time_limit_is_a_422_naming_it(tmp_path: Path, make_spec_data: Callable[..., dict[str, Any]]) -> None:
    settings = ServiceSettings(data_dir=tmp_path, scheduler=IN_PROCESS, admission_timeout_s=1e-6)
    with serve(settings) as http:
        refused = http.post("/experiments", json=make_spec_data("slow"))
    assert refused.status_code == 422 and "POLIS_ADMISSION_TIMEOUT_S" in refused.text
