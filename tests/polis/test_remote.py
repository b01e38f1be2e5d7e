"""polis.connect: the same spec on a real `polis serve` gives a run with the same datasets and row counts as a
local one, and the local run's agent, fork and results page; a wrong token is a typed 401 that never shows the
token; a bad spec is refused before it is sent. The service and the local session run in process (no cluster)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import polis
from engine.cluster_options import IN_PROCESS
from engine.results.report import ReportData, load_report
from service.admission.auth import create_token
from service.client_errors import ConflictError, NotFoundError, SpecRejectedError, UnauthorizedError, WaitTimeoutError
from service.report.page import BOKEH_STATIC_URL
from service.schemas import AgentMemory
from service.settings import ServiceSettings
from tests.polis.test_session import spec_data
from tests.service.live import serve


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    tokens = tmp_path_factory.mktemp("remote-tokens") / "tokens.json"
    token = create_token(tokens, "lab-a")
    settings = ServiceSettings(data_dir=tmp_path_factory.mktemp("remote-data"), scheduler=IN_PROCESS, auth_tokens=tokens)
    with serve(settings, token=token) as http:
        yield str(http.base_url).rstrip("/"), token


def test_a_spec_run_remotely_reads_like_the_same_spec_run_locally(service: tuple[str, str], tmp_path: Path) -> None:
    url, token = service
    spec = polis.ExperimentSpec.model_validate(spec_data("same-both-ways"))
    with polis.Session(scheduler=IN_PROCESS) as session:
        local = session.run(spec, tmp_path / "local", progress=False)
    with polis.connect(url, token) as remote_session:
        remote = remote_session.run(spec)
        assert remote.status == local.status == "completed"
        assert remote.datasets() == local.datasets()
        for name in remote.datasets():
            assert remote.table(name).num_rows == local.table(name).num_rows, name
        query = "SELECT agent_id, count(*) AS n FROM actions GROUP BY ALL ORDER BY agent_id"
        assert remote.sql(query).to_pylist() == local.sql(query).to_pylist()
        assert remote.df("actions").shape == local.df("actions").shape
        con = remote.duckdb()
        assert con.execute("SELECT count(*) FROM actions").fetchone() == (6,)
        assert remote.summary()["agent_steps"] == local.summary()["agent_steps"] == 6
        assert remote.detail.spec["name"] == "same-both-ways"  # the service's typed model, not a dict
        remote_agent, local_agent = remote.agent(1), local.agent(1)
        assert type(remote_agent) is type(local_agent)  # one model both ways
        assert (remote_agent.step, remote_agent.type, remote_agent.profile) == (local_agent.step, local_agent.type, local_agent.profile)
        # The results page's data comes over as JSON and is drawn here from the same values as the local page.
        local_data = load_report(local.location)
        assert local_data.panels and ReportData.from_json(local_data.to_json()) == local_data
        assert remote_session.open_run(remote.id).status == "completed"
        with pytest.raises(NotFoundError):
            remote_session.open_run("000000000000")


def test_a_wrong_token_is_a_typed_401_that_never_shows_the_token(service: tuple[str, str]) -> None:
    url, _ = service
    secret = "polis_wrong-token-that-must-not-leak"
    with polis.connect(url, secret) as remote_session, pytest.raises(UnauthorizedError) as refused:
        remote_session.submit(spec_data("refused"))
    assert refused.value.status_code == 401 and secret not in str(refused.value) and secret not in repr(refused.value)


def test_a_bad_spec_is_refused_locally_with_its_field_path_and_nothing_is_sent(service: tuple[str, str]) -> None:
    url, token = service
    bad: dict[str, Any] = spec_data("bad", agents=[{"id": -1}])
    with polis.connect(url, token) as remote_session:
        before = len(remote_session.client.list())
        with pytest.raises(polis.SpecError, match=r"agents\.0\.id"):
            remote_session.submit(bad)
        assert len(remote_session.client.list()) == before


def test_a_remote_run_has_the_local_runs_agent_fork_and_results_page(service: tuple[str, str], tmp_path: Path) -> None:
    url, token = service
    with polis.connect(url, token) as remote_session:
        run = remote_session.run(spec_data("remote-extras"))
        assert run.status == "completed"

        agent = run.agent(1)
        assert isinstance(agent, AgentMemory)  # the model polis.Run.agent returns
        assert (agent.experiment_id, agent.agent_id, agent.step) == (run.id, 1, 2) and agent.profile == {"name": "P1"}
        assert run.agent(1, step=1).step == 1
        with pytest.raises(NotFoundError):
            run.agent(99)

        page = run.report(tmp_path / "page.html")
        html = page.read_text(encoding="utf-8")
        assert page == tmp_path / "page.html" and "<html" in html.lower() and "remote-extras" in html
        assert BOKEH_STATIC_URL not in html and f"/experiments/{run.id}" not in html  # one file: nothing from the service

        later = {"steps": [{"type": "run", "num_steps": 2, "tick": 600}]}
        branch = run.fork(1, patch=later, name="remote-branch")
        assert branch.id != run.id and branch.status == "completed" and branch.detail.name == "remote-branch"
        assert branch.detail.forked_from is not None and branch.detail.forked_from.experiment == run.id
        first = "SELECT agent_id, summary FROM actions WHERE step = 1 ORDER BY agent_id"
        assert branch.sql(first).to_pylist() == run.sql(first).to_pylist()
        with pytest.raises(SpecRejectedError, match="at_step|tick"):
            run.fork(9)

        assert run.resume(budget={"max_calls": 10_000}) is run  # a finished run resumes to itself
        assert run.status == "completed" and run.summary()["agent_steps"] == 6

        frame = run.interview(["How was your day?", {"id": "mood", "prompt": "Your mood from 1 to 5?",
                                                     "response_type": "integer", "min": 1, "max": 5}], agents=[0, 2])
        assert sorted(set(frame["agent_id"])) == [0, 2] and sorted(set(frame["question_id"])) == ["mood", "q1"]
        assert len(frame) == 4 and set(frame["questionnaire_id"]) == {"interview-1"}
        try:  # the simulated LLM plans at random (seeded): the helper may answer or fail, and the row says which
            answer: str | None = run.ask("How many agents are there?")
        except polis.RunError as error:
            answer, failure = None, str(error)
        [row] = run.sql("SELECT status, answer, error FROM society_queries WHERE step_index = 2").to_pylist()
        assert row["answer"] == answer if answer is not None else failure.endswith(f"failed: {row['error']}")
        with pytest.raises(polis.PolisUsageError, match="not both"):
            run.resume(steps=[{"type": "ask", "question": "why?"}], budget={"max_calls": 5})
        with pytest.raises(SpecRejectedError, match="target_agent_ids"):
            run.interview("Anyone there?", agents=[99])


def test_wait_gives_up_after_its_timeout_and_a_running_run_does_not_resume(service: tuple[str, str]) -> None:
    url, token = service
    with polis.connect(url, token) as remote_session:
        long = remote_session.submit(spec_data("remote-long", steps=[{"type": "run", "num_steps": 200, "tick": 60}]))
        with pytest.raises(WaitTimeoutError):
            long.wait(timeout=0.2)
        with pytest.raises(ConflictError):
            long.resume()  # still queued or running
        remote_session.client.cancel(long.id)
        assert long.wait(timeout=120) is long and long.status == "cancelled"  # the timeout only bounds a hang
