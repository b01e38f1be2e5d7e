"""The queue and an experiment's lifecycle on a real uvicorn server: fair share, resume, delete, restarts."""

from __future__ import annotations

import io
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pyarrow.parquet as pq
import pytest

from engine.cluster_options import IN_PROCESS
from service.admission.auth import create_token
from service.settings import ServiceSettings
from tests.service.live import serve, wait_until_final

AGENTS = 4
#: The columns of an action row that do not depend on timing or on the run's id.
ROW_COLUMNS = ("agent_id", "step", "t", "status", "tools_called", "summary", "turns", "env_calls", "llm_calls",
               "input_tokens", "output_tokens")


def _spec(make_spec_data: Callable[..., dict], name: str, ticks: int) -> dict[str, Any]:
    spec = make_spec_data(name)
    spec["steps"] = [{"type": "run", "num_steps": ticks, "tick": 60}]
    return spec


def _submit(http: httpx.Client, spec: dict[str, Any], token: str | None = None) -> str:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    response = http.post("/experiments", json=spec, headers=headers)
    assert response.status_code == 201, response.text
    assert response.json()["status"] == "queued"
    return str(response.json()["id"])


def _wait_for_tick(http: httpx.Client, experiment_id: str, ticks: int, timeout: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        body = http.get(f"/experiments/{experiment_id}").json()
        assert body["status"] in {"queued", "running"}, body
        if body["progress"]["ticks_done"] >= ticks:
            return body
        time.sleep(0.05)
    raise TimeoutError(f"experiment {experiment_id} did not reach tick {ticks} within {timeout} s: {body}")


def _actions(http: httpx.Client, experiment_id: str) -> list[dict[str, Any]]:
    response = http.get(f"/experiments/{experiment_id}/datasets/actions.parquet")
    assert response.status_code == 200, response.text
    rows = pq.read_table(io.BytesIO(response.content), columns=list(ROW_COLUMNS)).to_pylist()
    return sorted(rows, key=lambda row: (row["agent_id"], row["step"]))


def _disk_use(path: Path, but: str | None = None) -> int:
    """Bytes of the files under ``path``, leaving out its child directory ``but``."""
    total = 0
    for child in path.rglob("*"):
        if but is not None and child.relative_to(path).parts[0] == but:
            continue
        if child.is_file():
            total += child.stat().st_size
    return total


def _intervals_do_not_overlap(records: list[dict[str, Any]]) -> bool:
    ordered = sorted(records, key=lambda r: r["started_at"])
    return all(a["finished_at"] <= b["started_at"] for a, b in zip(ordered, ordered[1:], strict=False))


def test_three_experiments_with_a_concurrency_quota_of_one_run_one_after_another(
    tmp_path: Path, make_spec_data: Callable[..., dict]
) -> None:
    settings = ServiceSettings(data_dir=tmp_path, scheduler=IN_PROCESS, max_running=3, quota_max_concurrent=1)
    with serve(settings) as http:
        ids = [_submit(http, _spec(make_spec_data, f"one-at-a-time-{i}", 2)) for i in range(3)]
        dropped = _submit(http, _spec(make_spec_data, "cancelled-while-queued", 2))
        statuses = [http.get(f"/experiments/{i}").json()["status"] for i in ids]
        assert statuses.count("queued") >= 2  # three slots, but the owner may run only one
        cancel = http.post(f"/experiments/{dropped}/cancel")
        assert cancel.status_code == 202 and cancel.json()["status"] == "cancelled"
        finals = [wait_until_final(http, i) for i in ids]
        never_ran = http.get(f"/experiments/{dropped}").json()
    assert (never_ran["status"], never_ran["started_at"], never_ran["progress"]["ticks_done"]) == ("cancelled", None, 0)
    assert not (tmp_path / "runs" / dropped).exists()
    assert {f["status"] for f in finals} == {"completed"}
    assert _intervals_do_not_overlap(finals)
    assert [f["id"] for f in sorted(finals, key=lambda f: f["started_at"])] == ids  # one owner: in order


def test_two_owners_queued_experiments_alternate(tmp_path: Path, make_spec_data: Callable[..., dict]) -> None:
    tokens_file = tmp_path / "tokens.json"
    tokens = {"lab-a": create_token(tokens_file, "lab-a"), "lab-b": create_token(tokens_file, "lab-b")}
    admin = create_token(tokens_file, "ops", role="admin")
    settings = ServiceSettings(data_dir=tmp_path / "data", scheduler=IN_PROCESS, auth_tokens=tokens_file,
                               max_running=1, quota_max_concurrent=5)
    with serve(settings, token=admin) as http:
        ids = [_submit(http, _spec(make_spec_data, f"{owner}-{i}", 1), tokens[owner])
               for owner, i in [("lab-a", 0), ("lab-a", 1), ("lab-a", 2), ("lab-b", 0), ("lab-b", 1)]]
        finals = [wait_until_final(http, experiment_id) for experiment_id in ids]
    assert {f["status"] for f in finals} == {"completed"}
    assert _intervals_do_not_overlap(finals)
    assert [f["owner"] for f in sorted(finals, key=lambda f: f["started_at"])] == ["lab-a", "lab-b", "lab-a", "lab-b", "lab-a"]


def test_resume_after_cancel_completes_with_every_agent_once_per_tick(
    tmp_path: Path, make_spec_data: Callable[..., dict]
) -> None:
    ticks = 40  # 12 ran to the end before the cancel arrived once workers had 2 task slots
    with serve(ServiceSettings(data_dir=tmp_path, scheduler=IN_PROCESS)) as http:
        experiment_id = _submit(http, _spec(make_spec_data, "resume-after-cancel", ticks))
        _wait_for_tick(http, experiment_id, 1)
        assert http.post(f"/experiments/{experiment_id}/cancel").status_code == 202
        cancelled = wait_until_final(http, experiment_id)
        assert cancelled["status"] == "cancelled" and cancelled["progress"]["ticks_done"] < ticks

        response = http.post(f"/experiments/{experiment_id}/resume", json={"budget": {"max_calls": 100_000}})
        assert response.status_code == 202, response.text
        assert response.json()["status"] == "queued"
        assert http.get(f"/experiments/{experiment_id}").json()["spec"]["budget"]["max_calls"] == 100_000
        busy = http.post(f"/experiments/{experiment_id}/resume")
        assert busy.status_code == 409 and "cancel it first" in busy.json()["detail"]

        done = wait_until_final(http, experiment_id)
        assert done["status"] == "completed", done["error"]
        assert done["progress"]["ticks_done"] == ticks and done["progress"]["agent_steps_done"] == AGENTS * ticks
        pairs = [(row["agent_id"], row["step"]) for row in _actions(http, experiment_id)]
    assert len(pairs) == len(set(pairs)) == AGENTS * ticks
    assert set(pairs) == {(agent, step) for agent in range(AGENTS) for step in range(1, ticks + 1)}


def test_resume_with_a_body_that_is_not_a_budget_is_422(tmp_path: Path) -> None:
    with serve(ServiceSettings(data_dir=tmp_path, scheduler=IN_PROCESS)) as http:
        assert http.post("/experiments/0123456789ab/resume").status_code == 404
        response = http.post("/experiments/0123456789ab/resume", json={"budget": {"max_calls": -1}})
        assert response.status_code == 422
        assert http.post("/experiments/0123456789ab/resume", json={"ticks": 3}).status_code == 422


def test_delete_frees_the_disk_and_a_second_delete_is_404(
    tmp_path: Path, make_spec_data: Callable[..., dict]
) -> None:
    with serve(ServiceSettings(data_dir=tmp_path, scheduler=IN_PROCESS)) as http:
        kept, deleted = (_submit(http, _spec(make_spec_data, name, 2)) for name in ("kept", "deleted"))
        live = _submit(http, _spec(make_spec_data, "still-running", 1000))
        for experiment_id in (kept, deleted):
            assert wait_until_final(http, experiment_id)["status"] == "completed"
        _wait_for_tick(http, live, 1)
        refused = http.delete(f"/experiments/{live}")
        assert refused.status_code == 409 and "running" in refused.json()["detail"]
        http.post(f"/experiments/{live}/cancel")
        wait_until_final(http, live)

        runs = tmp_path / "runs"
        run_dir = runs / deleted
        # The cancelled run's directory is left out: its last stale batch may still be unwinding.
        before, size = _disk_use(runs, but=live), _disk_use(run_dir)
        assert size > 0
        response = http.delete(f"/experiments/{deleted}")
        assert response.status_code == 204 and response.content == b""
        assert _disk_use(runs, but=live) == before - size == _disk_use(runs / kept)
        assert not run_dir.exists() and not (tmp_path / "experiments" / f"{deleted}.json").exists()
        assert http.get(f"/experiments/{deleted}").status_code == 404
        assert http.delete(f"/experiments/{deleted}").status_code == 404
        assert [e["id"] for e in http.get("/experiments").json()["experiments"]] == [live, kept]
        assert http.get(f"/experiments/{kept}/datasets/actions.parquet").status_code == 200


def test_a_restart_mid_run_resumes_the_run_to_the_same_rows_as_an_uninterrupted_one(
    tmp_path: Path, make_spec_data: Callable[..., dict]
) -> None:
    # 4 agents take ~40 ms a tick and progress is published every 0.5 s (it reads 0, 12, 26...): with 16
    # ticks a stop at the first reading of 2 or more found 12-15 done, and once, under load, all 16
    ticks = 64
    spec = _spec(make_spec_data, "restart-mid-run", ticks)
    settings = ServiceSettings(data_dir=tmp_path / "data", scheduler=IN_PROCESS)
    with serve(settings) as http:
        experiment_id = _submit(http, spec)
        _wait_for_tick(http, experiment_id, 2)
    stopped = json.loads((tmp_path / "data" / "experiments" / f"{experiment_id}.json").read_text())
    assert stopped["status"] == "interrupted" and stopped["resume_on_start"] is True
    assert 2 <= stopped["ticks_done"] < ticks, "the run must be stopped mid-way for this test to mean anything"

    with serve(settings) as http:
        resumed = wait_until_final(http, experiment_id)
        reference_id = _submit(http, spec)
        reference = wait_until_final(http, reference_id)
        assert (resumed["status"], reference["status"]) == ("completed", "completed"), (resumed["error"], reference["error"])
        assert resumed["resumed_after_restart"] == 1 and reference["resumed_after_restart"] == 0
        rows, reference_rows = _actions(http, experiment_id), _actions(http, reference_id)
    assert len(rows) == AGENTS * ticks
    assert rows == reference_rows


@pytest.mark.parametrize("status", ["queued", "running"])
def test_a_record_a_dead_process_left_live_is_run_again_at_start_up(
    tmp_path: Path, make_spec_data: Callable[..., dict], status: str
) -> None:
    settings = ServiceSettings(data_dir=tmp_path, scheduler=IN_PROCESS)
    with serve(settings) as http:
        finished = _submit(http, _spec(make_spec_data, "template", 2))
        wait_until_final(http, finished)
    # What a SIGKILLed service leaves: a record still claiming to wait or run, with no run directory yet.
    record = json.loads((tmp_path / "experiments" / f"{finished}.json").read_text())
    record.update(id="deadbeef0001", status=status, started_at=None, finished_at=None, ticks_done=0, agent_steps_done=0,
                  run_dir=str(tmp_path / "runs" / "deadbeef0001"))
    (tmp_path / "experiments" / "deadbeef0001.json").write_text(json.dumps(record))
    spec_file = (tmp_path / "experiments" / f"{finished}.spec.json")  # the spec is kept beside the record
    (tmp_path / "experiments" / "deadbeef0001.spec.json").write_text(spec_file.read_text())
    with serve(settings) as http:
        adopted = wait_until_final(http, "deadbeef0001")
    assert adopted["status"] == "completed", adopted["error"]
    assert adopted["progress"]["ticks_done"] == 2
    assert adopted["resumed_after_restart"] == (1 if status == "running" else 0)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_service_killed_mid_run_resumes_the_experiment_when_it_starts_again(
    tmp_path: Path, make_spec_data: Callable[..., dict]
) -> None:
    ticks = 16
    port = _free_port()
    # The killed service runs its experiments in its own process (in-process), and the kill takes its whole
    # process group, as a machine crash would: nothing of the run outlives it.
    env = {**os.environ, "POLIS_DATA_DIR": str(tmp_path), "POLIS_PORT": str(port), "POLIS_SCHEDULER": IN_PROCESS}
    code = "from service import ServiceSettings, run; run(ServiceSettings())"
    process = subprocess.Popen([sys.executable, "-c", code], env=env, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            deadline = time.monotonic() + 120  # only bounds a hang: start-up is slow on a busy machine
            while True:
                assert process.poll() is None, "polis serve exited during start-up"
                try:
                    http.get("/health")
                    break
                except httpx.TransportError:
                    assert time.monotonic() < deadline, "polis serve did not start within 120 s"
                    time.sleep(0.2)
            experiment_id = _submit(http, _spec(make_spec_data, "killed-service", ticks))
            _wait_for_tick(http, experiment_id, 2)
        os.killpg(process.pid, signal.SIGKILL)  # no lifespan exit: the record still says running
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    left = json.loads((tmp_path / "experiments" / f"{experiment_id}.json").read_text())
    assert left["status"] == "running" and left["ticks_done"] < ticks

    with serve(ServiceSettings(data_dir=tmp_path, scheduler=IN_PROCESS)) as http:
        done = wait_until_final(http, experiment_id)
        assert done["status"] == "completed", done["error"]
        assert done["resumed_after_restart"] == 1
        pairs = [(row["agent_id"], row["step"]) for row in _actions(http, experiment_id)]
    assert len(pairs) == len(set(pairs)) == AGENTS * ticks
