"""``GET /experiments/{id}/agents/{agent_id}`` on a real uvicorn: an agent's memory as of a step, 404 for an
unknown agent and for another owner's experiment."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.cluster_options import IN_PROCESS
from engine.storage.reader import ReplayReader
from service.admission.auth import create_token
from service.settings import ServiceSettings
from tests.service.live import serve, wait_until_final

CONFIG = {"max_react_turns": 2, "memory": {"max_chars": 300, "window_turns": 1}}


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("polis-agents-tokens") / "tokens.json"
    return {"path": path, "a": create_token(path, "lab-a"), "b": create_token(path, "lab-b")}


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("polis-agents")


@pytest.fixture(scope="module")
def http(data_dir: Path, tokens: dict[str, Any]) -> Iterator[httpx.Client]:
    settings = ServiceSettings(data_dir=data_dir, scheduler=IN_PROCESS, auth_tokens=tokens["path"])
    with serve(settings, token=tokens["a"]) as client:
        yield client


@pytest.fixture(scope="module")
def experiment(http: httpx.Client, data_dir: Path) -> dict[str, Any]:
    spec = {
        "name": "agents",
        "seed": 2,
        # A small thread window: the thread is compacted into AGENT_MEMORY.md from the first steps on.
        "population": [{"count": 3, "profile_template": {"name": "P{i}", "age": 40}, "config": CONFIG}],
        "environment": {"modules": [{"type": "MessagingSpace"}]},
        "steps": [{"type": "run", "num_steps": 3, "tick": 600}],
    }
    response = http.post("/experiments", json=spec)
    assert response.status_code == 201, response.text
    body = wait_until_final(http, response.json()["id"])
    assert body["status"] == "completed", body
    body["run_dir"] = str(data_dir / "runs" / body["id"])  # the service names no server path; the test knows it
    return body


def memory_rows(run_dir: str, agent_id: int) -> list[dict[str, Any]]:
    with ReplayReader(Path(run_dir)) as reader:
        return reader.query(f"SELECT step, memory, todo, episodes FROM agent_memory WHERE agent_id = {agent_id} ORDER BY step").to_pylist()


def test_the_agent_endpoint_returns_the_memory_as_of_a_step(http: httpx.Client, experiment: dict[str, Any]) -> None:
    rows = memory_rows(experiment["run_dir"], 1)
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert rows[-1]["memory"] and rows[-1]["memory"] != rows[0]["memory"]
    episodes = [e for r in rows for e in json.loads(r["episodes"])]

    latest = http.get(f"/experiments/{experiment['id']}/agents/1")
    assert latest.status_code == 200, latest.text
    body = latest.json()
    assert (body["agent_id"], body["step"], body["type"]) == (1, 3, "PersonAgent")
    assert body["profile"] == {"name": "P1", "age": 40} and body["config"] == CONFIG
    assert body["memory"] == rows[-1]["memory"] and body["episodes"] == episodes

    for step in (1, 2):
        at = http.get(f"/experiments/{experiment['id']}/agents/1", params={"step": step}).json()
        assert at["step"] == step
        assert at["memory"] == rows[step - 1]["memory"]
        assert at["todo"] == (json.loads(rows[step - 1]["todo"]) if rows[step - 1]["todo"] else None)
        assert at["episodes"] == [e for r in rows[:step] for e in json.loads(r["episodes"])]
    before = http.get(f"/experiments/{experiment['id']}/agents/1", params={"step": 0}).json()
    assert (before["step"], before["memory"], before["episodes"]) == (0, None, [])


def test_an_unknown_agent_and_another_owners_experiment_are_404(
    http: httpx.Client, experiment: dict[str, Any], tokens: dict[str, Any]
) -> None:
    unknown = http.get(f"/experiments/{experiment['id']}/agents/99")
    assert unknown.status_code == 404 and "no agent 99" in unknown.json()["detail"]
    other = http.get(f"/experiments/{experiment['id']}/agents/1", headers={"Authorization": f"Bearer {tokens['b']}"})
    assert other.status_code == 404 and "not found" in other.json()["detail"]
    assert http.get(f"/experiments/{experiment['id']}/agents/1", params={"step": -1}).status_code == 422


@pytest.fixture(scope="module")
def packed(http: httpx.Client) -> dict[str, Any]:
    spec = {"name": "agents-packed", "seed": 2, "storage": {"workspaces": "packed"},
            "population": [{"count": 3, "profile_template": {"name": "P{i}", "age": 40}, "config": CONFIG}],
            "environment": {"modules": [{"type": "MessagingSpace"}]},
            "steps": [{"type": "run", "num_steps": 3, "tick": 600}]}
    response = http.post("/experiments", json=spec)
    assert response.status_code == 201, response.text
    body = wait_until_final(http, response.json()["id"])
    assert body["status"] == "completed", body
    return body


@pytest.mark.parametrize("which", ["experiment", "packed"])
def test_an_agents_files_are_listed_and_read_as_the_run_stands_and_as_a_kept_tick(
    http: httpx.Client, which: str, request: pytest.FixtureRequest
) -> None:
    """The same answers whether the run keeps its workspaces in packs or in a folder per agent."""
    experiment = request.getfixturevalue(which)
    base = f"/experiments/{experiment['id']}/agents/1/files"
    listing = http.get(base)
    assert listing.status_code == 200, listing.text
    files = {f["path"]: f["size"] for f in listing.json()["files"]}
    assert {"config.json", "AGENT.json", ".runtime/logs/thread_messages.jsonl"} <= set(files)
    assert not any(path.startswith(".runtime/txn/") for path in files)
    agent = http.get(f"{base}/AGENT.json")
    assert agent.status_code == 200 and json.loads(agent.content)["step_count"] == 3 and len(agent.content) == files["AGENT.json"]
    at_1 = http.get(f"{base}/AGENT.json", params={"step": 1})
    assert at_1.status_code == 200 and json.loads(at_1.content)["step_count"] == 1
    assert http.get(base, params={"step": 1}).json()["step"] == 1
    for missing in ("nope.txt", "..%2F..%2FSOCIETY.json", "%2Fetc%2Fpasswd", "state"):  # encoded: httpx would fold a plain ..
        assert http.get(f"{base}/{missing}").status_code == 404, missing
    assert http.get(f"/experiments/{experiment['id']}/agents/99/files").status_code == 404
    assert http.get(base, params={"step": 9}).status_code == 422  # after the run's ticks
