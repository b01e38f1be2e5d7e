"""``GET /experiments/{id}/report`` and ``/report/data`` over a real uvicorn with two owners' tokens."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from engine.cluster_options import IN_PROCESS
from service.admission.auth import create_token
from service.settings import ServiceSettings
from tests.service.conftest import small_spec_data
from tests.service.live import serve, wait_until_final


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    root = tmp_path_factory.mktemp("report-route")
    path = root / "tokens.json"
    tokens = {"a": create_token(path, "lab-a"), "b": create_token(path, "lab-b")}
    with serve(ServiceSettings(data_dir=root / "data", scheduler=IN_PROCESS, auth_tokens=path)) as http:
        clients = {who: httpx.Client(base_url=http.base_url, headers={"Authorization": f"Bearer {t}"}, timeout=30)
                   for who, t in tokens.items()}
        try:
            response = clients["a"].post("/experiments", json=small_spec_data("report-of-a"))
            assert response.status_code == 201, response.text
            final = wait_until_final(clients["a"], response.json()["id"])
            assert final["status"] == "completed", final["error"]
            yield {"a": clients["a"], "b": clients["b"], "anyone": http, "experiment": final}
        finally:
            for client in clients.values():
                client.close()


def test_the_experiment_links_its_report_and_the_page_loads_bokeh_from_the_service(live: dict[str, Any]) -> None:
    a, experiment = live["a"], live["experiment"]
    assert experiment["report"] == f"/experiments/{experiment['id']}/report"
    page = a.get(experiment["report"])
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    scripts = re.findall(r'<script[^>]* src="([^"]+)"', page.text)
    assert scripts == ["/static/bokeh/static/js/bokeh.min.js"]
    js = live["anyone"].get(scripts[0])
    assert js.status_code == 200 and "Bokeh" in js.text[:5000]
    assert not re.search(r'(src|href)="https?://', page.text)
    assert "lab-a" in page.text and "report-of-a" in page.text


def test_the_report_data_holds_the_pages_panels_and_the_owner(live: dict[str, Any]) -> None:
    body = live["a"].get(f"/experiments/{live['experiment']['id']}/report/data").json()
    report = body["report"]
    assert report["summary"]["owner"] == "lab-a" and report["summary"]["status"] == "completed"
    assert [p["key"] for p in report["panels"]][:2] == ["agent_steps", "llm_calls"]
    assert body["signature"][0][0] == "agent_steps"
    assert sum(sum(line["y"]) for line in report["panels"][0]["lines"]) == 4 * 2  # 4 agents x 2 ticks


def test_another_owner_gets_404_and_no_token_gets_401(live: dict[str, Any]) -> None:
    experiment_id = live["experiment"]["id"]
    for path in (f"/experiments/{experiment_id}/report", f"/experiments/{experiment_id}/report/data"):
        assert live["b"].get(path).status_code == 404
        assert live["anyone"].get(path).status_code == 401
