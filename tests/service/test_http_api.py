"""The HTTP API end to end: a real uvicorn server, the real engine (in this process: ``scheduler="in-process"``), httpx.

What only a Dask cluster has, the dashboard links, is in ``tests/service/test_experiment_dashboard.py``."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("engine.society.run.runner", reason="engine/society/run/runner.py has not landed yet")
pytest.importorskip("engine.society.run.cluster", reason="engine/society/run/cluster.py has not landed yet")

import httpx
import pyarrow.parquet as pq

from engine.cluster_options import IN_PROCESS
from service.settings import ServiceSettings
from tests.service.live import serve, wait_until_final


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("polis-service")


@pytest.fixture(scope="module")
def http(data_dir: Path) -> Iterator[httpx.Client]:
    settings = ServiceSettings(data_dir=data_dir, scheduler=IN_PROCESS)
    with serve(settings) as client:
        yield client


@pytest.fixture(scope="module")
def completed(http: httpx.Client, make_spec_data: Callable[..., dict]) -> dict[str, Any]:
    """One small experiment submitted and run to its end; the last ``GET`` body."""
    response = http.post("/experiments", json=make_spec_data("http-smoke"))
    assert response.status_code == 201, response.text
    return wait_until_final(http, response.json()["id"])


def test_submit_returns_201_with_a_queued_record(http: httpx.Client, make_spec_data: Callable[..., dict]) -> None:
    response = http.post("/experiments", json=make_spec_data("submit-only"))
    assert response.status_code == 201, response.text
    body = response.json()
    assert len(body["id"]) == 12
    assert body["status"] in {"queued", "running"}
    assert "spec" not in body and "run_dir" not in body  # the id and a summary; GET has the spec
    assert response.headers["location"] == f"/experiments/{body['id']}"
    assert http.get(response.headers["location"]).json()["spec"]["agents"][3]["profile"]["name"] == "Di"
    wait_until_final(http, body["id"])


def test_experiment_completes_with_two_ticks_and_eight_agent_steps(completed: dict[str, Any]) -> None:
    assert completed["status"] == "completed", completed["error"]
    assert completed["error"] is None
    tokens = completed["progress"].pop("tokens")  # the last tick's token telemetry, by tier
    assert completed["progress"] == {"ticks_done": 2, "ticks_total": 2, "agent_steps_done": 8, "agent_steps_total": 8,
                                     "phase": None}  # an ended run does nothing
    assert tokens["llm"]["members"] == 4 and tokens["total"]["calls"] >= tokens["llm"]["calls"] >= 4
    assert completed["dashboard_link"] is None  # in-process: no Dask dashboard (on a cluster: the test below)
    assert completed["started_at"] and completed["finished_at"]
    assert completed["usage"]["llm_calls"] >= 1


def test_listing_shows_experiments_newest_first(http: httpx.Client, completed: dict[str, Any]) -> None:
    listed = http.get("/experiments").json()["experiments"]
    assert completed["id"] in [e["id"] for e in listed]
    created = [e["created_at"] for e in listed]
    assert created == sorted(created, reverse=True)


def test_datasets_list_actions_with_kind_rows_and_columns(http: httpx.Client, completed: dict[str, Any]) -> None:
    response = http.get(f"/experiments/{completed['id']}/datasets")
    assert response.status_code == 200, response.text
    datasets = {d["name"]: d for d in response.json()["datasets"]}
    assert "actions" in datasets
    actions = datasets["actions"]
    assert actions["rows"] == 8
    assert actions["kind"]
    assert "agent_id" in [c["name"] for c in actions["columns"]]


def test_download_actions_parquet_has_one_row_per_agent_step(http: httpx.Client, completed: dict[str, Any]) -> None:
    response = http.get(f"/experiments/{completed['id']}/datasets/actions.parquet")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/vnd.apache.parquet"
    assert f'filename="{completed["id"]}_actions.parquet"' in response.headers["content-disposition"]
    table = pq.read_table(io.BytesIO(response.content))
    assert table.num_rows == 8
    assert len(set(table.column("agent_id").to_pylist())) == 4


@pytest.mark.parametrize(
    ("mutate", "loc"),
    [
        (lambda spec: spec.update(batch_size=-1), ["body", "batch_size"]),
        (lambda spec: spec["agents"][0].pop("id"), ["body", "agents", 0, "id"]),
        (lambda spec: spec["agents"][1].update(type=7), ["body", "agents", 1, "type"]),
        (lambda spec: spec["steps"][0].update(num_steps=0), ["body", "steps", 0, "run", "num_steps"]),
    ],
    ids=["negative-batch-size", "agent-without-id", "agent-type-not-a-string", "zero-steps"],
)
def test_malformed_spec_is_422_naming_the_field_path(
    http: httpx.Client, make_spec_data: Callable[..., dict], mutate: Callable[[dict], Any], loc: list[Any]
) -> None:
    spec = make_spec_data("bad")
    mutate(spec)
    response = http.post("/experiments", json=spec)
    assert response.status_code == 422, response.text
    assert loc in [item["loc"] for item in response.json()["detail"]]


def test_spec_level_problem_is_422(http: httpx.Client, make_spec_data: Callable[..., dict]) -> None:
    spec = make_spec_data("dupes")
    spec["agents"][1]["id"] = 0
    response = http.post("/experiments", json=spec)
    assert response.status_code == 422, response.text
    assert "appears twice" in json.dumps(response.json()["detail"])


def test_unknown_experiment_is_404(http: httpx.Client) -> None:
    for path in (
        "/experiments/0123456789ab",
        "/experiments/0123456789ab/datasets",
        "/experiments/nope/datasets/actions.parquet",
    ):
        response = http.get(path)
        assert response.status_code == 404, path
        assert "not found" in response.json()["detail"]


def test_unknown_dataset_is_404(http: httpx.Client, completed: dict[str, Any]) -> None:
    response = http.get(f"/experiments/{completed['id']}/datasets/no_such_dataset.parquet")
    assert response.status_code == 404
    assert "no_such_dataset" in response.json()["detail"]


def test_invalid_dataset_name_is_404_before_touching_disk(http: httpx.Client, completed: dict[str, Any]) -> None:
    for name in ("bad-name", "1abc", "..", "actions.x"):
        response = http.get(f"/experiments/{completed['id']}/datasets/{name}.parquet")
        assert response.status_code == 404, name
        assert "not a valid dataset name" in response.json()["detail"], name
    # An encoded slash decodes to a path no route matches.
    assert http.get(f"/experiments/{completed['id']}/datasets/..%2F_schema.parquet").status_code == 404


def test_cancel_of_a_finished_experiment_is_409(http: httpx.Client, completed: dict[str, Any]) -> None:
    response = http.post(f"/experiments/{completed['id']}/cancel")
    assert response.status_code == 409
    assert "completed" in response.json()["detail"]


def _long_spec(make_spec_data: Callable[..., dict], name: str) -> dict[str, Any]:
    spec = make_spec_data(name)
    spec["steps"] = [{"type": "run", "num_steps": 1000, "tick": 60}]
    return spec


def _wait_for_first_tick(http: httpx.Client, experiment_id: str, timeout: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = http.get(f"/experiments/{experiment_id}").json()
        assert body["status"] in {"queued", "running"}, body
        if body["progress"]["ticks_done"] >= 1:
            return body
        time.sleep(0.1)
    raise TimeoutError(f"experiment {experiment_id} finished no tick within {timeout} s")


def test_cancel_stops_a_running_experiment(http: httpx.Client, make_spec_data: Callable[..., dict]) -> None:
    experiment_id = http.post("/experiments", json=_long_spec(make_spec_data, "to-cancel")).json()["id"]
    _wait_for_first_tick(http, experiment_id)
    response = http.post(f"/experiments/{experiment_id}/cancel")
    assert response.status_code == 202, response.text
    final = wait_until_final(http, experiment_id)
    assert final["status"] == "cancelled"
    assert 1 <= final["progress"]["ticks_done"] < 1000


def test_stopping_the_service_mid_run_marks_the_experiment_interrupted(
    tmp_path: Path, make_spec_data: Callable[..., dict]
) -> None:
    settings = ServiceSettings(data_dir=tmp_path, scheduler=IN_PROCESS)
    with serve(settings) as http:
        experiment_id = http.post("/experiments", json=_long_spec(make_spec_data, "to-interrupt")).json()["id"]
        _wait_for_first_tick(http, experiment_id)
    on_disk = json.loads((tmp_path / "experiments" / f"{experiment_id}.json").read_text())
    assert on_disk["status"] == "interrupted", on_disk.get("error")
    assert "shut down" in on_disk["error"]
    assert on_disk["finished_at"] is not None
    assert on_disk["resume_on_start"] is True  # the next start resumes it (tests/service/test_lifecycle.py)


def test_health_says_only_that_the_service_is_up_and_the_cluster_route_has_no_dashboard_in_process(http: httpx.Client) -> None:
    assert http.get("/health").json() == {"status": "ok"}
    assert http.get("/cluster").json() == {"running": 0, "dashboard_link": None}


def test_restarted_service_keeps_finished_experiments_and_resumes_running_ones(
    tmp_path: Path, make_spec_data: Callable[..., dict]
) -> None:
    settings = ServiceSettings(data_dir=tmp_path, scheduler=IN_PROCESS)
    with serve(settings) as http:
        experiment_id = http.post("/experiments", json=make_spec_data("before-restart")).json()["id"]
        assert wait_until_final(http, experiment_id)["status"] == "completed"

    # A record a dead service process left "running", over a run that had in fact finished
    # (the process died after the run's last commit, before writing the record).
    record = json.loads((tmp_path / "experiments" / f"{experiment_id}.json").read_text())
    record.update(id="deadbeef0001", status="running", finished_at=None, error=None)
    (tmp_path / "experiments" / "deadbeef0001.json").write_text(json.dumps(record))
    spec_file = (tmp_path / "experiments" / f"{experiment_id}.spec.json")  # the spec is kept beside the record
    (tmp_path / "experiments" / "deadbeef0001.spec.json").write_text(spec_file.read_text())

    with serve(settings) as http:
        resumed = wait_until_final(http, "deadbeef0001")
        assert (resumed["status"], resumed["resumed_after_restart"], resumed["error"]) == ("completed", 1, None)
        assert resumed["progress"]["ticks_done"] == 2
        survived = http.get(f"/experiments/{experiment_id}").json()
        assert survived["progress"]["ticks_done"] == 2 and survived["resumed_after_restart"] == 0
        datasets = http.get(f"/experiments/{experiment_id}/datasets").json()["datasets"]
        assert {"name": "actions", "rows": 8}.items() <= next(d for d in datasets if d["name"] == "actions").items()


def test_app_without_a_scheduler_starts_its_own_local_cluster(tmp_path: Path) -> None:
    # Any free port for the dashboard: 8787 may be taken by another cluster on this machine.
    with serve(ServiceSettings(data_dir=tmp_path, n_workers=1, dashboard_address="127.0.0.1:0")) as http:
        body = http.get("/cluster").json()
    assert body["dashboard_link"].startswith("http://127.0.0.1:")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_run_serves_with_settings_from_the_environment_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = _free_port()
    env = {**os.environ, "POLIS_DATA_DIR": str(tmp_path), "POLIS_SCHEDULER": IN_PROCESS, "POLIS_PORT": str(port)}
    code = "from service import ServiceSettings, run; run(ServiceSettings())"
    process = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120  # only bounds a hang
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                response = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        assert response.json()["status"] == "ok"
        assert (tmp_path / "experiments").is_dir()
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
        # uvicorn re-raises the signal it handled once shutdown is done, so -SIGTERM is a clean exit.
        assert process.returncode in (0, -signal.SIGTERM), stderr
        assert "Application shutdown complete" in stderr
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def test_a_sweep_submitted_over_rest_runs_every_cell_and_downloads_with_cell_columns(
    http: httpx.Client, make_spec_data: Callable[..., dict]
) -> None:
    spec = make_spec_data("http-sweep")
    spec["steps"] = [{"type": "run", "num_steps": 1, "tick": 3600}]
    spec["sweep"] = {"grid": {"batch_size": [1, 4]}, "replications": 2}
    response = http.post("/experiments", json=spec)
    assert response.status_code == 201, response.text
    body = wait_until_final(http, response.json()["id"])
    assert body["status"] == "completed", body
    download = http.get(f"/experiments/{body['id']}/datasets/actions.parquet")
    assert download.status_code == 200, download.text
    table = pq.read_table(io.BytesIO(download.content))
    assert table.num_rows == 4 * 4  # 4 cells x 4 agents x 1 tick
    cells = table.column("cell").to_pylist()
    assert sorted(set(cells)) == [0, 1, 2, 3] and all(cells.count(c) == 4 for c in range(4))
    assert sorted(set(table.column("param_batch_size").to_pylist())) == [1, 4]
