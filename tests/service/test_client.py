"""``PolisClient`` against a live service: submit, read, wait, results, and errors typed per status."""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml

from engine.cluster_options import IN_PROCESS
from engine.spec import ExperimentSpec
from service.admission.auth import create_token
from service.client import FINAL_STATUSES, PolisClient
from service.client_errors import (
    ConflictError,
    ConnectionFailedError,
    NotFoundError,
    PolisClientError,
    QueryRefusedError,
    SpecRejectedError,
    UnauthorizedError,
)
from service.schemas import AgentFiles, AgentMemory, DatasetInfo, ExperimentAccepted, ExperimentBrief, ExperimentDetail
from service.settings import ServiceSettings
from tests.service.live import serve


@pytest.fixture(scope="module")
def tokens(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """A token file; lab-a's and lab-b's tokens."""
    path = tmp_path_factory.mktemp("tokens") / "tokens.json"
    return path, create_token(path, "lab-a"), create_token(path, "lab-b")


@pytest.fixture(scope="module")
def service(
    tmp_path_factory: pytest.TempPathFactory, tokens: tuple[Path, str, str]
) -> Iterator[tuple[str, str]]:
    """A live service with a token file; yields its base URL and lab-a's token."""
    settings = ServiceSettings(data_dir=tmp_path_factory.mktemp("client"), scheduler=IN_PROCESS, auth_tokens=tokens[0])
    with serve(settings) as http:
        yield str(http.base_url), tokens[1]


@pytest.fixture(scope="module")
def polis(service: tuple[str, str]) -> Iterator[PolisClient]:
    with PolisClient(*service) as client:
        yield client


@pytest.fixture(scope="module")
def finished(polis: PolisClient, make_spec_data: Callable[..., dict]) -> dict[str, Any]:
    """One experiment submitted as a dict and waited for; what ``wait`` returned and what it wrote."""
    submitted = polis.submit(make_spec_data("client-dict"))
    progress = io.StringIO()
    detail = polis.wait(submitted.id, timeout=120, file=progress)
    return {"submitted": submitted, "detail": detail, "progress": progress.getvalue()}


def test_submit_returns_the_accepted_experiment(finished: dict[str, Any]) -> None:
    submitted = finished["submitted"]
    assert isinstance(submitted, ExperimentAccepted)
    assert submitted.status in {"queued", "running"}
    assert submitted.owner == "lab-a"
    assert submitted.name == "client-dict"
    assert submitted.report == f"/experiments/{submitted.id}/report" and submitted.events == f"/experiments/{submitted.id}/events"
    assert submitted.forked_from is None


def test_wait_returns_the_final_detail_and_shows_progress(finished: dict[str, Any]) -> None:
    detail = finished["detail"]
    assert isinstance(detail, ExperimentDetail)
    assert detail.status == "completed", detail.error
    assert detail.progress.agent_steps_done == detail.progress.agent_steps_total == 8
    assert detail.usage is not None and detail.usage.llm_calls > 0 and detail.usage.duration_s > 0
    assert detail.spec["name"] == "client-dict" and detail.finished_at is not None
    assert "tick 2/2 agent-steps 8/8" in finished["progress"]
    assert finished["progress"].endswith("\n")


def test_get_and_list_show_the_experiment(polis: PolisClient, finished: dict[str, Any]) -> None:
    experiment_id = finished["detail"].id
    got = polis.get(experiment_id)
    assert isinstance(got, ExperimentDetail) and got.status in FINAL_STATUSES and got.owner == "lab-a"
    listed = {e.id: e for e in polis.list()}
    assert isinstance(listed[experiment_id], ExperimentBrief) and listed[experiment_id].name == "client-dict"


def test_dataset_comes_back_as_an_arrow_table_of_every_agent_step(polis: PolisClient, finished: dict[str, Any]) -> None:
    experiment_id = finished["detail"].id
    datasets = {d.name: d for d in polis.datasets(experiment_id)}
    assert isinstance(datasets["actions"], DatasetInfo) and datasets["actions"].rows == 8
    assert "agent_id" in [c.name for c in datasets["actions"].columns]
    actions = polis.dataset(experiment_id, "actions")
    assert isinstance(actions, pa.Table)
    assert actions.num_rows == 8


def test_submit_reads_a_json_file_and_an_experiment_spec(
    polis: PolisClient, tmp_path: Path, make_spec_data: Callable[..., dict]
) -> None:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps(make_spec_data("client-file")))
    from_file = polis.submit(path)
    from_model = polis.submit(ExperimentSpec.model_validate(make_spec_data("client-model")))
    assert from_file.name == "client-file"
    assert from_model.name == "client-model"
    for experiment in (from_file, from_model):
        assert polis.wait(experiment.id, progress=False, timeout=120).status == "completed"


def test_cancel_stops_a_queued_or_running_experiment(polis: PolisClient, make_spec_data: Callable[..., dict]) -> None:
    spec = make_spec_data("client-cancel")
    spec["steps"] = [{"type": "run", "num_steps": 200, "tick": 60}]
    experiment_id = polis.submit(spec).id
    assert polis.cancel(experiment_id).id == experiment_id
    assert polis.wait(experiment_id, progress=False, timeout=120).status == "cancelled"  # the timeout only bounds a hang


def test_cancel_of_a_finished_experiment_raises_conflict(polis: PolisClient, finished: dict[str, Any]) -> None:
    with pytest.raises(ConflictError) as raised:
        polis.cancel(finished["detail"].id)
    assert raised.value.status_code == 409


def test_an_unknown_experiment_raises_not_found(polis: PolisClient) -> None:
    with pytest.raises(NotFoundError):
        polis.get("0123456789ab")
    with pytest.raises(NotFoundError):
        polis.wait("0123456789ab", progress=False, timeout=10)


def test_another_owners_experiment_is_not_found(
    service: tuple[str, str], tokens: tuple[Path, str, str], finished: dict[str, Any]
) -> None:
    with PolisClient(service[0], token=tokens[2]) as lab_b:
        with pytest.raises(NotFoundError):
            lab_b.get(finished["detail"].id)
        with pytest.raises(NotFoundError):
            lab_b.dataset(finished["detail"].id, "actions")
        with pytest.raises(NotFoundError):
            lab_b.agent(finished["detail"].id, 1)
        assert finished["detail"].id not in [e.id for e in lab_b.list()]


def test_an_unknown_token_raises_unauthorized_without_showing_it(service: tuple[str, str]) -> None:
    secret = "polis_not-a-token"
    with PolisClient(service[0], token=secret) as stranger, pytest.raises(UnauthorizedError) as raised:
        stranger.list()
    assert raised.value.status_code == 401
    assert secret not in str(raised.value) and secret not in repr(raised.value)


def test_an_invalid_spec_raises_spec_rejected_naming_the_field(polis: PolisClient, make_spec_data: Callable[..., dict]) -> None:
    spec = make_spec_data("client-invalid")
    spec["agents"][0]["id"] = "not-an-int"
    with pytest.raises(SpecRejectedError) as raised:
        polis.submit(spec)
    assert ["body", "agents", 0, "id"] in [item["loc"][:4] for item in raised.value.errors]
    assert isinstance(raised.value, PolisClientError)


def test_an_unreachable_service_raises_connection_failed() -> None:
    with PolisClient("http://127.0.0.1:9", timeout=2) as nowhere, pytest.raises(ConnectionFailedError):
        nowhere.list()


def test_submit_sends_a_yaml_file_as_application_yaml(
    polis: PolisClient, tmp_path: Path, make_spec_data: Callable[..., dict]
) -> None:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(make_spec_data("client-yaml")))
    submitted = polis.submit(path)
    assert submitted.name == "client-yaml"
    assert polis.wait(submitted.id, progress=False, timeout=120).status == "completed"


def test_wait_draws_polis_runs_line_from_tick_events(finished: dict[str, Any]) -> None:
    # The LLM counters exist only in tick events (a polled detail has none): the line came from the stream.
    last = finished["progress"].strip().split("\r")[-1]
    assert "tick 2/2 agent-steps 8/8 llm " in last and " 0 calls" not in last


def test_a_run_through_the_client_from_sql_to_steps_resume_and_delete(
    polis: PolisClient, make_spec_data: Callable[..., dict]
) -> None:
    run_id = polis.submit(make_spec_data("client-lifecycle")).id
    assert polis.wait(run_id, progress=False, timeout=120).status == "completed"
    counted = polis.sql(run_id, "SELECT count(*) AS n FROM actions")
    assert counted.rows == [[8]] and counted.truncated is False and counted.columns[0].name == "n"
    assert polis.sql(run_id, "SELECT agent_id FROM actions ORDER BY agent_id", format="arrow").num_rows == 8
    with pytest.raises(QueryRefusedError, match="/etc/passwd"):
        polis.sql(run_id, "SELECT * FROM read_csv('/etc/passwd')")

    questionnaire = {"type": "questionnaire", "questionnaire_id": "after", "questions": [
        {"id": "mood", "prompt": "How is your mood (0-10)?", "response_type": "integer", "min": 0, "max": 10}]}
    assert polis.steps(run_id, [questionnaire]).status == "queued"
    assert polis.wait(run_id, progress=False, timeout=120).status == "completed"
    assert polis.sql(run_id, "SELECT count(*) FROM questionnaire_answers").rows == [[4]]
    with pytest.raises(ConflictError):
        polis.cancel(run_id)  # finished

    resumed = polis.resume(run_id, budget={"max_calls": 10_000})
    assert isinstance(resumed, ExperimentAccepted) and resumed.status == "queued"
    assert polis.wait(run_id, progress=False, timeout=120).status == "completed"
    assert polis.sql(run_id, "SELECT count(*) FROM actions").rows == [[8]]  # a finished run resumes to itself
    polis.delete(run_id)
    with pytest.raises(NotFoundError):
        polis.get(run_id)


def test_an_agent_its_files_and_the_report_come_back_typed(polis: PolisClient, finished: dict[str, Any]) -> None:
    experiment_id = finished["detail"].id
    agent = polis.agent(experiment_id, 1)
    assert isinstance(agent, AgentMemory)
    assert (agent.experiment_id, agent.agent_id, agent.step) == (experiment_id, 1, 2)
    assert agent.profile["name"] and agent.type
    assert polis.agent(experiment_id, 1, step=1).step == 1
    with pytest.raises(NotFoundError):
        polis.agent(experiment_id, 99)

    files = polis.agent_files(experiment_id, 1)
    assert isinstance(files, AgentFiles) and files.step is None
    sizes = {f.path: f.size for f in files.files}
    assert "AGENT.json" in sizes
    content = polis.agent_file(experiment_id, 1, "AGENT.json")
    assert len(content) == sizes["AGENT.json"] and json.loads(content)["step_count"] == 2
    assert json.loads(polis.agent_file(experiment_id, 1, "AGENT.json", step=1))["step_count"] == 1

    data = polis.report_data(experiment_id)
    assert data["report"]["title"] == "client-dict" and data["report"]["panels"]
    assert "client-dict" in polis.report_page(experiment_id)


def test_a_fork_through_the_client_names_its_parent(polis: PolisClient, finished: dict[str, Any]) -> None:
    parent = finished["detail"].id
    fork = polis.fork(parent, 1, name="client-fork")
    assert isinstance(fork, ExperimentAccepted) and fork.id != parent and fork.name == "client-fork"
    assert fork.forked_from is not None and (fork.forked_from.experiment, fork.forked_from.at_step) == (parent, 1)
    assert polis.wait(fork.id, progress=False, timeout=120).status == "completed"
    with pytest.raises(SpecRejectedError):
        polis.fork(parent, 9)
