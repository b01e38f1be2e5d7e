"""``POST /experiments/{id}/fork`` on a real uvicorn, run in-process: a fork at tick 2 of a seeded 4-tick
run ends as the parent did from the shared response cache, one with an intervention inserted runs it, the parent is
untouched, and bad forks are refused before any experiment is made."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from engine.cluster_options import IN_PROCESS
from service.admission.auth import create_token
from service.settings import ServiceSettings
from tests.engine.society.crash_support import crash_spec
from tests.service.live import serve, wait_until_final

#: The columns of ``actions`` a fork with no patch must reproduce (``run`` names the driver; timings differ).
ACTION_COLUMNS = "agent_id, step, t, status, tools_called, summary, turns, env_calls, llm_calls, input_tokens, output_tokens"
INTERVENTION = "A storm warning is issued for tonight: everyone should stay home."
#: lab-a's quota of agent-steps: the 6-agent 4-tick parent (24) fits, a fork that adds two ticks (36) does not.
MAX_AGENT_STEPS = 30


def parent_spec() -> dict[str, Any]:
    """Six seeded people messaging over the codegen router for four ticks, every tick kept."""
    return {**crash_spec(), "name": "fork-parent", "steps": [{"type": "run", "num_steps": 4, "tick": 3600}]}


class Service:
    """The live service, and a client for a second owner."""

    def __init__(self, http: httpx.Client, other_token: str, data_dir: Path) -> None:
        self.http = http
        self.other = {"Authorization": f"Bearer {other_token}"}
        self.data_dir = data_dir

    def run_dir(self, experiment: str) -> Path:
        return self.data_dir / "runs" / experiment

    def rows(self, experiment: str, query: str) -> list[list[Any]]:
        response = self.http.post(f"/experiments/{experiment}/sql", json={"sql": query})
        assert response.status_code == 200, response.text
        return list(response.json()["rows"])

    def submit(self, spec: dict[str, Any]) -> str:
        response = self.http.post("/experiments", json=spec)
        assert response.status_code == 201, response.text
        return str(response.json()["id"])

    def fork(self, experiment: str, body: dict[str, Any]) -> httpx.Response:
        return self.http.post(f"/experiments/{experiment}/fork", json=body)

    def experiment_ids(self) -> set[str]:
        return {e["id"] for e in self.http.get("/experiments").json()["experiments"]}


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    config = tmp_path_factory.mktemp("fork-config")
    tokens = config / "tokens.json"
    token, other = create_token(tokens, "lab-a"), create_token(tokens, "lab-b")
    grants = config / "grants.json"
    grants.write_text(json.dumps({"quotas": {"lab-a": {"max_agent_steps": MAX_AGENT_STEPS}}}), encoding="utf-8")
    settings = ServiceSettings(data_dir=tmp_path_factory.mktemp("polis-forks"), scheduler=IN_PROCESS,
                               auth_tokens=tokens, grants_file=grants)
    with serve(settings, token=token) as http:
        yield Service(http, other, settings.data_dir)


@pytest.fixture(scope="module")
def parent(service: Service) -> str:
    experiment = service.submit(parent_spec())
    assert wait_until_final(service.http, experiment, timeout=300)["status"] == "completed"
    return experiment


def file_hashes(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and not p.is_symlink()}


def test_a_fork_at_tick_2_without_a_patch_ends_as_the_parent_did_with_every_later_call_cached(
    service: Service, parent: str
) -> None:
    parent_files = file_hashes(service.run_dir(parent))
    posted = service.fork(parent, {"at_step": 2})
    assert posted.status_code == 201, posted.text
    fork = posted.json()
    assert posted.headers["Location"] == f"/experiments/{fork['id']}"
    assert fork["id"] != parent and fork["owner"] == "lab-a" and fork["status"] == "queued"
    assert fork["forked_from"] == {"experiment": parent, "at_step": 2}
    assert fork["name"] == "fork-parent (fork at 2)"
    assert "spec" not in fork and "run_dir" not in fork  # the id and a summary, never the input or a server path

    done = wait_until_final(service.http, fork["id"], timeout=300)
    assert done["status"] == "completed", done
    assert done["progress"]["ticks_done"] == 4
    query = f"SELECT {ACTION_COLUMNS} FROM actions ORDER BY agent_id, step"
    assert service.rows(fork["id"], query) == service.rows(parent, query)
    calls, cached = service.rows(fork["id"], "SELECT count(*), count(*) FILTER (WHERE cached) FROM llm_calls WHERE step > 2")[0]
    assert calls > 0 and cached == calls
    assert file_hashes(service.run_dir(parent)) == parent_files
    assert service.http.get(f"/experiments/{parent}").json()["forked_from"] is None
    listed = {e["id"]: e for e in service.http.get("/experiments").json()["experiments"]}
    assert listed[fork["id"]]["forked_from"] == {"experiment": parent, "at_step": 2}


def test_a_fork_with_an_intervention_inserted_after_tick_2_runs_it_and_shares_the_first_two_ticks(
    service: Service, parent: str
) -> None:
    steps = [{"type": "run", "num_steps": 2, "tick": 3600}, {"type": "intervene", "instruction": INTERVENTION},
             {"type": "run", "num_steps": 2, "tick": 3600}]
    posted = service.fork(parent, {"at_step": 2, "patch": {"steps": steps}, "name": "storm"})
    assert posted.status_code == 201, posted.text
    fork = posted.json()
    stored = service.http.get(f"/experiments/{fork['id']}").json()["spec"]
    assert fork["name"] == "storm" and [s["type"] for s in stored["steps"]] == ["run", "intervene", "run"]
    done = wait_until_final(service.http, fork["id"], timeout=300)
    assert done["status"] in ("completed", "completed_with_errors"), done  # the simulated helper's plan may fail: counted
    assert service.rows(fork["id"], "SELECT step_index, step, kind, text FROM society_queries") == [[1, 2, "intervene", INTERVENTION]]
    early = f"SELECT {ACTION_COLUMNS} FROM actions WHERE step <= 2 ORDER BY agent_id, step"
    assert service.rows(fork["id"], early) == service.rows(parent, early)
    assert service.rows(fork["id"], "SELECT max(step), count(*) FROM actions") == [[4, 24]]


def error_locs(response: httpx.Response) -> list[list[str | int]]:
    assert response.status_code == 422, response.text
    return [item["loc"] for item in response.json()["detail"]]


def test_bad_forks_are_refused_with_the_field_and_make_no_experiment(service: Service, parent: str) -> None:
    before = service.experiment_ids()
    assert service.http.post("/experiments/000000000000/fork", json={"at_step": 1}).status_code == 404
    assert service.http.post(f"/experiments/{parent}/fork", json={"at_step": 1}, headers=service.other).status_code == 404

    unknown_step = error_locs(service.fork(parent, {"at_step": 2, "patch": {"steps": [{"type": "nope"}]}}))
    assert unknown_step[0][:4] == ["body", "patch", "steps", 0], unknown_step
    assert error_locs(service.fork(parent, {"at_step": 9})) == [["body", "at_step"]]
    assert error_locs(service.fork(parent, {"at_step": -1})) == [["body", "at_step"]]
    assert error_locs(service.fork(parent, {"at_step": 1, "then": "x"})) == [["body", "then"]]
    population = {"population": [{"count": 7, "profile_template": {"name": "Resident {i}"}}]}
    assert error_locs(service.fork(parent, {"at_step": 2, "patch": population})) == [["body", "patch", "population"]]
    past = {"steps": [{"type": "run", "num_steps": 1, "tick": 600}, {"type": "run", "num_steps": 3, "tick": 3600}]}
    assert error_locs(service.fork(parent, {"at_step": 2, "patch": past})) == [["body", "patch", "steps"]]
    over_quota = {"steps": [{"type": "run", "num_steps": 6, "tick": 3600}]}
    refused = service.fork(parent, {"at_step": 2, "patch": over_quota})
    assert error_locs(refused) == [["body", "patch", "steps"]] and "max_agent_steps" in refused.json()["detail"][0]["msg"]
    not_granted = error_locs(service.fork(parent, {"at_step": 2, "patch": {"llm": {"default": {"model": "openai/gpt-4o"}}}}))
    assert not_granted[0][:3] == ["body", "patch", "llm"], not_granted
    assert service.experiment_ids() == before


def test_a_tick_the_parent_does_not_keep_is_422_at_at_step(service: Service, make_spec_data: Callable[..., dict]) -> None:
    experiment = service.submit({**make_spec_data("fork-keep-0"), "snapshots": {"keep": 0}})
    assert wait_until_final(service.http, experiment)["status"] == "completed"
    refused = service.fork(experiment, {"at_step": 1})
    assert error_locs(refused) == [["body", "at_step"]]
    assert "not kept" in refused.json()["detail"][0]["msg"]


def test_a_live_parent_is_409_and_a_sweep_422(service: Service, make_spec_data: Callable[..., dict]) -> None:
    live = service.submit({**make_spec_data("fork-live"), "sweep": {"replications": 2}})
    busy = service.fork(live, {"at_step": 1})
    assert busy.status_code == 409, busy.text
    assert "cancel it first" in busy.json()["detail"]
    service.http.post(f"/experiments/{live}/cancel")
    assert wait_until_final(service.http, live)["status"] in {"cancelled", "completed"}
    sweep = service.fork(live, {"at_step": 1})
    assert sweep.status_code == 422 and "sweep" in sweep.json()["detail"][0]["msg"]
