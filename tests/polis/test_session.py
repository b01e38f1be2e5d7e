"""The front door: ``import polis``, a run from a script with no ``__main__`` guard, a Session (in process: no cluster),
the Run handle (Arrow, pandas, SQL, the views in the user's own DuckDB), and the errors a new user meets first."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import duckdb
import pytest

import polis
from engine.cluster_options import IN_PROCESS
from polis.session import PolisUsageError, as_spec

ROOT = Path(__file__).resolve().parents[2]


def spec_data(name: str = "front-door", **changes: Any) -> dict[str, Any]:
    return {"name": name, "seed": 4, "llm": {"default": {"model": "sim/default"}},
            "agents": [{"id": i, "profile": {"name": f"P{i}"}, "config": {"max_react_turns": 1}} for i in range(3)],
            "environment": {"modules": [{"type": "MessagingSpace"}]},
            "steps": [{"type": "run", "num_steps": 2, "tick": 600}], **changes}


@pytest.fixture(scope="module")
def session() -> Any:
    with polis.Session(scheduler=IN_PROCESS) as session:  # the front door's behaviour, not a cluster's
        yield session


@pytest.fixture(scope="module")
def finished(session: polis.Session, tmp_path_factory: pytest.TempPathFactory) -> polis.Run:
    return session.run(spec_data(), tmp_path_factory.mktemp("front") / "run", progress=False)


def test_a_script_without_a_main_guard_runs_the_demo_and_reads_it_with_pandas(tmp_path: Path) -> None:
    # The check, as a new user types it: no __main__ guard, a LocalCluster of worker processes.
    script = tmp_path / "first.py"
    script.write_text("import polis\n"
                      f"r = polis.run({str(ROOT / 'examples' / 'demo.yaml')!r}, 'runs/demo', progress=False)\n"
                      "print('ROWS', len(r.df('actions')), r.status)\n"
                      "print(r.df('actions').head())\n")
    env = {**os.environ, "POLIS_N_WORKERS": "1", "POLIS_DASHBOARD_ADDRESS": "127.0.0.1:0"}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("ROWS") == 1  # the workers did not run the script's top level again
    [line] = [line for line in done.stdout.splitlines() if line.startswith("ROWS")]
    assert int(line.split()[1]) > 0 and line.split()[2] == "completed"
    assert "agent_id" in done.stdout


def test_a_run_reads_as_arrow_pandas_sql_and_in_the_users_own_duckdb(finished: polis.Run) -> None:
    assert finished.status == "completed" and finished.id == "run"
    summary = finished.summary()
    assert summary["ticks"] == 2 and summary["agent_steps"] == 6 and summary["llm_calls"] >= 6
    assert {"actions", "llm_calls"} <= set(finished.datasets())
    table = finished.table("actions")
    frame = finished.df("actions")
    assert table.num_rows == len(frame) == 6 and list(frame.columns) == table.column_names
    counted = finished.sql("SELECT agent_id, count(*) AS n FROM actions GROUP BY ALL ORDER BY agent_id").to_pylist()
    assert counted == [{"agent_id": i, "n": 2} for i in range(3)]

    con = duckdb.connect()
    con.execute("CREATE TABLE survey AS SELECT * FROM (VALUES (0, 'left'), (2, 'right')) AS t(agent_id, leaning)")
    assert finished.duckdb(con) is con
    joined = con.execute("SELECT leaning, count(*) FROM actions JOIN survey USING (agent_id) GROUP BY ALL ORDER BY 1").fetchall()
    assert joined == [("left", 2), ("right", 2)]
    con.execute("COPY (SELECT 1) TO '" + str(Path(finished.location).parent / "mine.csv") + "'")  # the user's own: not locked
    with pytest.raises(polis.StorageError, match="has no dataset 'nope'"):
        finished.table("nope")


def test_open_run_reads_a_stored_run_and_says_what_it_found_elsewhere(finished: polis.Run, tmp_path: Path) -> None:
    again = polis.open_run(finished.location)
    assert again.table("actions").num_rows == 6 and again.summary()["status"] == "completed"
    with pytest.raises(polis.StorageError, match="does not exist"):
        polis.open_run(tmp_path / "nowhere")
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("x")
    with pytest.raises(polis.StorageError, match=r"not a run: a directory without SOCIETY_STEP.json .*a\.txt"):
        polis.open_run(tmp_path / "notes")
    with pytest.raises(polis.StorageError, match="is a file"):
        polis.open_run(tmp_path / "notes" / "a.txt")


def test_a_bad_spec_is_refused_with_its_field_path_before_any_cluster_starts(tmp_path: Path) -> None:
    session = polis.Session(scheduler="tcp://127.0.0.1:9")  # nothing listens there: a start would fail differently
    with pytest.raises(polis.SpecError) as refused:
        session.run(spec_data(steps=[{"type": "run", "num_steps": 0}]), tmp_path / "r")
    assert "steps.0.run.num_steps" in str(refused.value) or "steps.0" in str(refused.value)
    assert session._loop is None  # nothing was started
    with pytest.raises(polis.SpecError, match="cannot read spec file"):
        session.run(tmp_path / "missing.yaml")
    typed = polis.ExperimentSpec(name="typed", agents=[polis.AgentSpec(id=0)], steps=[polis.RunStep(num_steps=1)])
    assert as_spec(typed) is typed and as_spec(typed.model_dump()) == typed


def test_a_run_into_a_used_folder_is_refused_before_any_cluster_and_overwrite_replaces_it(
        finished: polis.Run, session: polis.Session, tmp_path: Path) -> None:
    stranger = polis.Session(scheduler="tcp://127.0.0.1:9")  # nothing listens there: a start would fail differently
    before = sorted(p.relative_to(finished.location) for p in Path(finished.location).rglob("*"))
    with pytest.raises(polis.RunExistsError) as refused:
        stranger.run(spec_data("another"), finished.location, progress=False)
    message = str(refused.value)
    assert "already holds a run (completed, 2 ticks committed)" in message
    assert "polis.open_run(" in message and "polis.resume(" in message and "overwrite=True" in message
    assert stranger._loop is None  # refused before anything started
    with pytest.raises(polis.RunExistsError):
        stranger.submit(spec_data("another"), finished.location)
    assert sorted(p.relative_to(finished.location) for p in Path(finished.location).rglob("*")) == before  # untouched
    with pytest.raises(PolisUsageError, match="Session.resume"):
        stranger.run(spec_data(), finished.location, resume=True)

    # overwrite=True replaces it: the new run is the one asked for (5 agents, 1 tick), none of the old rows remain
    target = tmp_path / "reused"
    session.run(spec_data("old"), target, progress=False)
    fresh = session.run(spec_data("new", agents=[{"id": i, "profile": {"name": f"N{i}"}, "config": {"max_react_turns": 1}}
                                                 for i in range(5)], steps=[{"type": "run", "num_steps": 1, "tick": 600}]),
                        target, progress=False, overwrite=True)
    assert fresh.status == "completed"
    actions = fresh.df("actions")
    assert sorted(actions["agent_id"].unique()) == [0, 1, 2, 3, 4] and set(actions["step"]) == {1}
    # a folder that holds no run is written into as before; overwrite never removes what is not a run
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "keep.txt").write_text("mine", encoding="utf-8")
    session.run(spec_data("beside"), notes, progress=False, overwrite=True)
    assert (notes / "keep.txt").read_text(encoding="utf-8") == "mine"


async def test_inside_async_code_run_says_to_await_arun_and_arun_works(session: polis.Session, tmp_path: Path) -> None:
    with pytest.raises(PolisUsageError, match=r"use `await polis.arun\(...\)`"):
        session.run(spec_data(), tmp_path / "blocked")
    done = await session.arun(spec_data("awaited"), tmp_path / "awaited", progress=False)
    assert done.status == "completed" and done.table("actions").num_rows == 6


def test_submit_reports_progress_and_returns_the_run(session: polis.Session, tmp_path: Path) -> None:
    future = session.submit(spec_data("submitted"), tmp_path / "submitted", progress=False)
    run = future.result(timeout=180)
    assert future.done() and run.location == tmp_path / "submitted"
    last = future.progress()
    assert last is not None and last.ticks_done == 2 and last.agent_steps_done == 6
    assert session.client is None and session.dashboard_link is None  # in process: no cluster behind the session


def test_a_sweep_opens_as_one_run_with_its_cells(session: polis.Session, tmp_path: Path) -> None:
    swept = session.run(spec_data("swept", sweep={"replications": 2}), tmp_path / "sweep", progress=False)
    assert swept.is_sweep and swept.status == "completed"
    assert sorted(swept.sql("SELECT DISTINCT cell FROM actions").column("cell").to_pylist()) == [0, 1]
    assert asyncio.iscoroutinefunction(polis.arun)


def test_a_fork_starts_from_the_parents_tick_and_a_tick_it_never_had_is_refused(
    session: polis.Session, finished: polis.Run, tmp_path: Path
) -> None:
    branch = session.fork(finished, 1, tmp_path / "branch", patch={"steps": [{"type": "run", "num_steps": 2, "tick": 600}]},
                          progress=False)
    assert branch.status == "completed" and branch.summary()["ticks"] == 2
    parent_first = finished.sql("SELECT agent_id, summary FROM actions WHERE step = 1 ORDER BY agent_id").to_pylist()
    assert branch.sql("SELECT agent_id, summary FROM actions WHERE step = 1 ORDER BY agent_id").to_pylist() == parent_first
    with pytest.raises(polis.PolisError, match="at_step|tick"):
        session.fork(finished, 9, tmp_path / "never")
    assert not (tmp_path / "never").exists()


def test_an_agent_as_of_a_step_and_the_results_page_as_one_file(finished: polis.Run, tmp_path: Path) -> None:
    agent = finished.agent(1)
    assert agent.agent_id == 1 and agent.profile == {"name": "P1"} and agent.step == 2
    assert finished.agent(1, step=1).step == 1
    page = finished.report(tmp_path / "page.html")
    html = page.read_text(encoding="utf-8")
    assert page == tmp_path / "page.html" and "<html" in html.lower() and "front-door" in html


def test_a_run_stopped_by_its_budget_resumes_with_a_new_one_and_ends_as_one_run(session: polis.Session, tmp_path: Path) -> None:
    short = session.run(spec_data("short", budget={"max_calls": 2}), tmp_path / "short", progress=False)
    assert short.status == "budget_exhausted" and short.summary()["ticks"] < 2
    with pytest.raises(polis.SpecError, match="budget.max_calls"):
        short.resume(budget={"max_calls": 0})  # refused before the cluster, with its field path
    resumed = short.resume(budget={"max_calls": 1000}, progress=False)
    assert resumed.status == "completed" and resumed.summary()["ticks"] == 2
    assert resumed.sql("SELECT count(*) AS n FROM actions").column("n").to_pylist() == [6]  # every agent-step once


def test_ask_and_interview_append_read_only_steps_and_return_their_answers(session: polis.Session, tmp_path: Path) -> None:
    run = session.run(spec_data("asked"), tmp_path / "asked", progress=False)
    before = run.sql("SELECT count(*) AS n FROM actions").column("n").to_pylist()

    # The simulated LLM plans at random (seeded): the helper may answer or fail; either way the row says so.
    try:
        answer: str | None = run.ask("How many agents sent a message?")
    except polis.RunError as error:
        answer, failure = None, str(error)
    [row] = run.sql("SELECT kind, text, status, answer, error FROM society_queries").to_pylist()
    assert row["kind"] == "ask" and row["text"] == "How many agents sent a message?"
    if answer is not None:
        assert row["status"] == "ok" and row["answer"] == answer
    else:
        assert row["status"] == "failed" and failure.endswith(f"failed: {row['error']}") and row["error"]

    frame = run.interview(["How was your day?", {"id": "mood", "prompt": "Your mood from 1 to 5?", "response_type": "integer",
                                                 "min": 1, "max": 5}], agents=[0, 2])
    assert sorted(set(frame["agent_id"])) == [0, 2] and sorted(set(frame["question_id"])) == ["mood", "q1"]
    assert len(frame) == 4 and set(frame["questionnaire_id"]) == {"interview-2"}
    with pytest.raises(polis.SpecError, match="target_agent_ids"):
        run.interview("Anyone there?", agents=[99])
    assert run.sql("SELECT count(*) AS n FROM actions").column("n").to_pylist() == before  # no new ticks
    # A failed ask (the simulated helper may plan with an agent there is not) is a failure the run counts.
    failed = run.sql("SELECT count(*) AS n FROM society_queries WHERE status = 'failed'").column("n")[0].as_py()
    assert run.status == ("completed" if failed == 0 else "completed_with_errors") or (failed and run.status == "failed")


def shown_by_the_bar(monkeypatch: pytest.MonkeyPatch) -> list[polis.RunProgress]:
    """Replace the session's tqdm bar with one keeping what it is shown (the list returned)."""
    shown: list[polis.RunProgress] = []

    class Bar:  # the tqdm bar's interface
        def __init__(self, name: str) -> None:
            self.name = name

        def __call__(self, progress: polis.RunProgress) -> None:
            shown.append(progress)

        def note(self, text: str) -> None:
            pass

        def close(self) -> None:
            pass

    monkeypatch.setattr(polis.session, "ProgressBar", Bar)
    return shown


def test_a_new_sessions_progress_bar_shows_the_cluster_starting_then_the_runs_phases(cluster_address: str, tmp_path: Path,
                                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    shown = shown_by_the_bar(monkeypatch)
    with polis.Session(scheduler=cluster_address) as fresh:
        fresh.run(spec_data("phases"), tmp_path / "phases", progress=True)
    first = shown[0]
    assert (first.phase, first.status, first.ticks_total, first.agent_steps_total) == ("starting cluster", "starting", 2, 6)
    phases = [p.phase for p in shown]
    assert {"creating workspaces", "tick", "committing"} <= set(phases)
    assert shown[-1].status == "completed" and shown[-1].phase is None


def test_an_in_process_sessions_progress_bar_names_no_cluster_and_no_workers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shown = shown_by_the_bar(monkeypatch)
    with polis.Session(scheduler=IN_PROCESS) as fresh:
        fresh.run(spec_data("phases"), tmp_path / "phases", progress=True)
    phases = [p.phase for p in shown if p.phase is not None]
    assert phases[0] == "creating workspaces"
    assert not {"starting cluster", "checking workers"} & set(phases)
    assert shown[-1].status == "completed"

