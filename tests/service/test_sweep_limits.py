"""A 10,000-cell sweep on a real uvicorn server, run in-process: it shares the queue, cancels at once and stays cancelled."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from engine.cluster_options import IN_PROCESS
from service.admission.auth import create_token
from service.settings import ServiceSettings
from tests.service.live import serve, wait_until_final

#: The reproducer of issue 33: one agent, one tick, 10,000 replications.
TINY_SWEEP = {"name": "t", "llm": {"default": {"model": "sim/default"}}, "agents": [{"id": 0}],
              "steps": [{"type": "run", "num_steps": 1}], "sweep": {"replications": 10_000}}


def _wait(http: httpx.Client, experiment_id: str, predicate: Callable[[dict[str, Any]], bool], timeout: float = 120.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        body = http.get(f"/experiments/{experiment_id}").json()
        if predicate(body):
            return body
        if time.monotonic() > deadline:
            raise TimeoutError(f"experiment {experiment_id}: {body}")
        time.sleep(0.1)


def test_a_10000_cell_sweep_leaves_room_for_another_owner_and_a_cancel_ends_it_for_good(
    tmp_path: Path, make_spec_data: Callable[..., dict[str, Any]]
) -> None:
    tokens_file = tmp_path / "tokens.json"
    lab_a, lab_b = create_token(tokens_file, "lab-a"), create_token(tokens_file, "lab-b")
    admin = create_token(tokens_file, "ops", role="admin")
    settings = ServiceSettings(data_dir=tmp_path / "data", scheduler=IN_PROCESS, auth_tokens=tokens_file,
                               max_running=2, quota_max_concurrent=2)
    with serve(settings, token=admin) as http:
        submitted = http.post("/experiments", json=TINY_SWEEP, headers={"Authorization": f"Bearer {lab_a}"})
        assert submitted.status_code == 201, submitted.text
        sweep = submitted.json()["id"]
        _wait(http, sweep, lambda body: body["progress"]["ticks_done"] >= 1)  # cells are running
        other = http.post("/experiments", json={**make_spec_data("lab-b-run"), "steps": [{"type": "run", "num_steps": 1}]},
                          headers={"Authorization": f"Bearer {lab_b}"})
        assert other.status_code == 201, other.text
        done = wait_until_final(http, other.json()["id"])
        assert done["status"] == "completed"
        assert http.get(f"/experiments/{sweep}").json()["status"] == "running"  # lab-b did not wait for 10,000 cells

        cancel = http.post(f"/experiments/{sweep}/cancel")
        assert cancel.status_code == 202, cancel.text
        ended = wait_until_final(http, sweep)
        assert ended["status"] == "cancelled"

    root = tmp_path / "data" / "runs" / sweep
    manifest = json.loads((root / "SWEEP.json").read_text())
    assert len(manifest["cells"]) == 10_000 and {c["status"] for c in manifest["cells"]} == {"pending"}  # written once
    changes = [json.loads(line) for line in (root / "SWEEP_LOG.jsonl").read_text().splitlines()]
    started = {change["index"] for change in changes}
    assert 1 <= len(started) < 100  # a few cells ran; the rest never started and were never written
    assert {change["status"] for change in changes} <= {"running", "completed", "cancelled"}

    with serve(settings, token=admin) as http:  # a restart keeps it cancelled and runs none of its cells
        assert http.get(f"/experiments/{sweep}").json()["status"] == "cancelled"
        assert http.get("/cluster").json()["running"] == 0
    assert (root / "SWEEP_LOG.jsonl").read_text().count("\n") == len(changes)
