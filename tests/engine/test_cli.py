"""The polis command as a user runs it (subprocesses): in process (``POLIS_SCHEDULER=in-process``), but where a test checks
what only a cluster has: the dashboard line (of the CLI's own LocalCluster, of an external scheduler) and the address
the workers reach a local model at."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml
from distributed import Client

from engine.cluster_options import IN_PROCESS
from tests.engine.society.span_ledger import SpanLedger, read_ledger

POLIS = [sys.executable, "-m", "engine.cli"]
IN_PROCESS_ENV = {**os.environ, "POLIS_SCHEDULER": IN_PROCESS}  #: a run in the CLI's own process: no LocalCluster to start


def polis(*args: str, timeout: float = 180, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``polis ARGS`` in process, or in ``env``."""
    return subprocess.run([*POLIS, *args], capture_output=True, text=True, timeout=timeout,
                          env=IN_PROCESS_ENV if env is None else env)


def _empty_run(where: Path) -> None:
    """A run that committed no rows: what the query checks below need (their SQL reads no dataset)."""
    (where / "replay").mkdir(parents=True)
    (where / "SOCIETY_STEP.json").write_text(json.dumps({"current_time": "2024-01-01T00:00:00", "status": "completed"}))


def test_spec_schema_prints_json_schema():
    result = polis("spec-schema")
    assert result.returncode == 0
    assert json.loads(result.stdout)["title"] == "ExperimentSpec"


def test_run_then_query_a_small_spec(tmp_path: Path):
    spec = {
        "name": "cli-small",
        "agents": [{"id": i, "profile": {"name": f"P{i}"}} for i in range(3)],
        "steps": [{"type": "run", "num_steps": 2, "tick": 600}],
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    # On the CLI's own LocalCluster (no POLIS_SCHEDULER): its dashboard is what this checks.
    on_cluster = {k: v for k, v in os.environ.items() if k != "POLIS_SCHEDULER"}
    run = polis("run", str(tmp_path / "spec.yaml"), "--run-dir", str(tmp_path / "run"), "--batch-size", "2", env=on_cluster)
    assert run.returncode == 0, run.stderr
    assert "status: completed" in run.stdout
    assert "Dask dashboard: http" in run.stderr

    query = polis("query", str(tmp_path / "run"), "SELECT count(*) AS n, count(DISTINCT agent_id) AS agents FROM actions")
    assert query.returncode == 0, query.stderr
    assert query.stdout.split("\n")[2].split() == ["6", "|", "3"]


def test_a_run_into_a_used_folder_is_refused_before_the_cluster_and_overwrite_replaces_it(tmp_path: Path):
    spec = {"name": "cli-reuse", "agents": [{"id": i, "profile": {"name": f"P{i}"}} for i in range(2)],
            "steps": [{"type": "run", "num_steps": 1, "tick": 600}]}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    run = str(tmp_path / "run")
    assert polis("run", str(tmp_path / "spec.yaml"), "--run-dir", run).returncode == 0
    nowhere = {**os.environ, "POLIS_SCHEDULER": "tcp://127.0.0.1:9"}  # nothing listens: starting a client would fail
    again = polis("run", str(tmp_path / "spec.yaml"), "--run-dir", run, env=nowhere)
    assert again.returncode == 2 and again.stdout == ""
    assert again.stderr.startswith(f"polis: {run} already holds a run (completed, 1 tick committed)")
    assert "--overwrite" in again.stderr and "--resume" in again.stderr and "Traceback" not in again.stderr
    spec["agents"].append({"id": 7, "profile": {"name": "P7"}})
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    replaced = polis("run", str(tmp_path / "spec.yaml"), "--run-dir", run, "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    query = polis("query", run, "SELECT string_agg(DISTINCT agent_id::VARCHAR, ',' ORDER BY agent_id::VARCHAR) AS ids FROM actions")
    assert query.stdout.split("\n")[2].strip() == "0,1,7"
    both = polis("run", "--resume", run, "--overwrite")
    assert both.returncode == 2 and "give one" in both.stderr


def test_invalid_spec_exits_2_with_the_field_path(tmp_path: Path):
    (tmp_path / "bad.json").write_text(json.dumps({"name": "x", "agents": [{"id": 1}], "steps": [], "batch_size": -3}))
    result = polis("run", str(tmp_path / "bad.json"), "--run-dir", str(tmp_path / "run"))
    assert result.returncode == 2
    assert "batch_size" in result.stderr and "steps" in result.stderr
    assert not (tmp_path / "run").exists()


def test_query_on_a_mistyped_run_folder_says_there_is_no_run_there(tmp_path: Path):
    (tmp_path / "runz").mkdir()
    (tmp_path / "runz" / "notes.txt").write_text("x")
    for args in ([str(tmp_path / "runz")], [str(tmp_path / "runz"), "SELECT * FROM actions"], [str(tmp_path / "nowhere")]):
        found = polis("query", *args)
        assert found.returncode == 2 and found.stdout == "" and "Traceback" not in found.stderr
        assert found.stderr.startswith(f"polis: {args[0]} is not a run: "), found.stderr
    assert "it holds: notes.txt" in polis("query", str(tmp_path / "runz")).stderr
    assert "it does not exist" in polis("query", str(tmp_path / "nowhere")).stderr


def test_query_refuses_anything_but_select(tmp_path: Path):
    _empty_run(tmp_path / "run")
    result = polis("query", str(tmp_path / "run"), "COPY (SELECT 1) TO 'x.csv'")
    assert result.returncode == 2
    assert "SELECT" in result.stderr


def test_query_refuses_functions_that_run_sql_text_or_read_the_environment(tmp_path: Path):
    _empty_run(tmp_path / "run")
    result = polis("query", str(tmp_path / "run"), "SELECT * FROM query('SELECT getenv(''HOME'')')")
    assert result.returncode == 2
    assert result.stderr.strip() == "polis: the function query() is not allowed here: it runs SQL that this check never sees"


def test_a_cross_join_is_stopped_at_the_query_time_limit_with_a_clear_error(tmp_path: Path):
    _empty_run(tmp_path / "run")
    env = {**os.environ, "POLIS_QUERY_TIMEOUT_S": "1"}
    # 10^18 rows: unstopped, it runs far past the subprocess timeout (which only bounds a hang), so an answer
    # at all, and this one, says the limit stopped it.
    result = subprocess.run(
        [*POLIS, "query", str(tmp_path / "run"), "SELECT count(*) FROM range(1000000) a, range(1000000) b, range(1000000) c"],
        capture_output=True, text=True, timeout=150, env=env,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == "polis: the query ran past its 1 s time limit and was stopped"


def test_a_memory_hungry_string_agg_fails_cleanly_at_the_memory_limit(tmp_path: Path):
    _empty_run(tmp_path / "run")
    env = {**os.environ, "POLIS_QUERY_MEMORY_LIMIT": "64MB", "POLIS_QUERY_TIMEOUT_S": "60"}
    result = subprocess.run(
        [*POLIS, "query", str(tmp_path / "run"), "SELECT string_agg(repeat('x', 100) || i::VARCHAR, ',') FROM range(2000000) t(i)"],
        capture_output=True, text=True, timeout=120, env=env,
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("polis: the query needed more than its 64MB memory limit and was stopped (Out of Memory")
    assert "Traceback" not in result.stderr


def test_estimate_projects_calls_for_the_whole_spec(tmp_path: Path):
    spec = {
        "name": "est",
        "population": [{"count": 40, "config": {"max_react_turns": 1, "tools": ["finish"]}}],
        "steps": [{"type": "run", "num_steps": 5, "tick": 600}],
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    result = polis("estimate", str(tmp_path / "spec.yaml"), "--agents", "4", "--ticks", "1")
    assert result.returncode == 0, result.stderr
    # One decision per agent-step and no env asks: exactly 1 call per agent-step, 200 agent-steps,
    # and the env's world description once per run; a sample without spread gives one number.
    assert "LLM calls of the whole spec, by what makes them:\n  agents, every tick: 200\n" in result.stdout
    assert "  once a run: 1\n" in result.stdout
    assert "~201 calls (201)" in result.stdout
    assert "USD unknown" in result.stdout  # the simulated LLM has no price


def test_resume_with_a_raised_budget_completes_the_run(tmp_path: Path):
    spec = {
        "name": "budget",
        "population": [{"count": 4, "config": {"max_react_turns": 1, "tools": ["finish"]}}],
        "steps": [{"type": "run", "num_steps": 2, "tick": 600}],
        "budget": {"max_calls": 5},
        "batch_size": 2,
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    refused = polis("run", str(tmp_path / "spec.yaml"), "--run-dir", str(tmp_path / "run"))
    # 4 agents x 2 ticks and the world description: 9 calls, past the cap of 5
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "polis: not started: budget.max_calls is 5 but the estimate reaches 9 calls" in refused.stderr
    assert not (tmp_path / "run").exists()
    first = polis("run", str(tmp_path / "spec.yaml"), "--run-dir", str(tmp_path / "run"), "--force")
    assert first.returncode == 1
    assert first.stderr.splitlines()[0] == "Dask dashboard: none (in-process: no cluster)"
    assert "status: budget_exhausted" in first.stdout
    resumed = polis("run", "--resume", str(tmp_path / "run"), "--max-calls", "50")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "status: completed" in resumed.stdout


def test_a_sweep_runs_from_the_cli_and_reports_every_cell(tmp_path: Path):
    spec = {
        "name": "cli-sweep",
        "agents": [{"id": i, "profile": {"name": f"P{i}"}} for i in range(2)],
        "steps": [{"type": "run", "num_steps": 1, "tick": 600}],
        "sweep": {"grid": {"environment.router": ["codegen", "react"]}, "replications": 2},
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    root = tmp_path / "sweep"
    run = polis("run", str(tmp_path / "spec.yaml"), "--run-dir", str(root))
    assert run.returncode == 0, run.stderr
    assert "sweep: 4 cells {'completed': 4}" in run.stdout
    status = polis("status", str(root))
    assert status.stdout.count(": completed  params={'environment.router'") == 4
    query = polis("query", str(root), "SELECT param_environment_router AS router, count(*) AS n FROM actions GROUP BY 1 ORDER BY 1")
    assert query.returncode == 0, query.stderr
    assert [line.split() for line in query.stdout.splitlines()[2:4]] == [["codegen", "|", "4"], ["react", "|", "4"]]
    again = polis("run", "--resume", str(root))  # every cell completed: nothing runs again
    assert again.returncode == 0, again.stderr
    assert "sweep: 4 cells {'completed': 4}" in again.stdout


def test_polis_input_dirs_lets_a_run_read_a_city_file_from_an_allowed_folder(tmp_path: Path):
    import shutil

    allowed = tmp_path / "shared-inputs"
    allowed.mkdir()
    shutil.copy(Path(__file__).resolve().parents[2] / "engine/env/modules/data/small_city.json", allowed / "city.json")
    spec = {
        "name": "inputs",
        "population": [{"count": 2, "config": {"max_react_turns": 1, "tools": ["finish"]}}],
        "environment": {"modules": [{"type": "MobilitySpace", "kwargs": {"city_file": str(allowed / "city.json")}}]},
        "steps": [{"type": "run", "num_steps": 1, "tick": 600}],
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    argv = [*POLIS, "run", str(tmp_path / "spec.yaml")]
    refused = subprocess.run([*argv, "--run-dir", str(tmp_path / "a")], capture_output=True, text=True, timeout=180, env=IN_PROCESS_ENV)
    assert refused.returncode != 0 and "city_file must be a file under" in refused.stdout + refused.stderr
    env = {**IN_PROCESS_ENV, "POLIS_INPUT_DIRS": str(allowed)}
    allowed_run = subprocess.run([*argv, "--run-dir", str(tmp_path / "b")], capture_output=True, text=True, timeout=180, env=env)
    assert allowed_run.returncode == 0, allowed_run.stdout + allowed_run.stderr[-2000:]
    assert "status: completed" in allowed_run.stdout


def test_polis_run_prints_its_dashboard_page_first_and_runs_in_the_span_it_names(cluster_address: str, tmp_path: Path):
    spec = {"name": "cli-dash", "agents": [{"id": i, "profile": {"name": f"P{i}"}} for i in range(2)],
            "steps": [{"type": "run", "num_steps": 1, "tick": 600}]}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    with Client(cluster_address) as dask:
        dask.register_plugin(SpanLedger())
        env = {**os.environ, "POLIS_SCHEDULER": cluster_address}
        run = subprocess.run([*POLIS, "run", str(tmp_path / "spec.yaml"), "--run-dir", str(tmp_path / "exp-7")],
                             capture_output=True, text=True, timeout=180, env=env)
        assert run.returncode == 0, run.stderr
        page = dask.dashboard_link.removesuffix("/status") + "/individual-fine-performance-metrics"
        assert run.stderr.splitlines()[0] == f"Dask dashboard: {page}  (filter by span tag 'exp-7'; tasks polis_exp_7_*)"
        assert httpx.get(page, timeout=30).status_code == 200
        spans = {key: tuple(name) for key, name in dask.run_on_scheduler(read_ledger).items() if key.startswith("polis_exp_7_")}
    assert spans and set(spans.values()) == {("exp-7",)}


@pytest.mark.slow  # a run on the real local model: 29 s on 2 shared cores
def test_polis_run_says_where_the_local_model_listens(cluster_address: str, tmp_path: Path):
    pytest.importorskip("xllamacpp", reason="the local extra is not installed")
    spec = {"name": "cli-local", "llm": {"default": {"model": "local/smollm2"}},
            "agents": [{"id": 0, "profile": {"name": "P0"}, "config": {"max_react_turns": 1, "tools": ["finish"]}}],
            "environment": {"router": "react", "max_router_steps": 1, "modules": [{"type": "MessagingSpace"}]},
            "steps": [{"type": "run", "num_steps": 1, "tick": 600}]}
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    env = {**os.environ, "POLIS_SCHEDULER": cluster_address}
    run = subprocess.run([*POLIS, "run", str(tmp_path / "spec.yaml"), "--run-dir", str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=300, env=env)
    assert run.returncode == 0, run.stderr
    assert run.stderr.splitlines()[1] == "local models: llama.cpp listens on 127.0.0.1 (the driver's address toward the scheduler)"


def test_max_calls_sets_the_call_cap_and_keeps_the_token_and_cost_caps():
    from engine.cli import with_max_calls
    from engine.spec import parse_spec

    steps = [{"type": "run", "num_steps": 1}]
    people = [{"count": 1}]
    spec = parse_spec({"name": "caps", "steps": steps, "population": people, "budget": {"max_calls": 5, "max_tokens": 9000, "max_cost_usd": 1.5}})
    raised = with_max_calls(spec, 50)

    assert raised.budget.model_dump() == {"max_calls": 50, "max_tokens": 9000, "max_cost_usd": 1.5}
    assert with_max_calls(parse_spec({"name": "none", "steps": steps, "population": people}), 7).budget.model_dump() == {
        "max_calls": 7, "max_tokens": None, "max_cost_usd": None}
