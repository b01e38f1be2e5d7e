"""The results page's data, read from a real demo run and a real 2x2 sweep run in this process (real Parquet, real DuckDB)."""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import Callable, Coroutine
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from engine.env.metrics import ENV_METRICS
from engine.errors import NotARunError
from engine.results.report import load_report
from engine.results.series import answer_panels
from engine.society.run.runner import run_experiment
from engine.society.run.sweep import run_sweep
from engine.society.shells import InProcessShell
from engine.spec import parse_spec
from engine.storage import ReplayWriter, atomic_write_json, read_json, shard_name
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import RunLayout
from engine.storage.sweep_layout import cell_dir, read_sweep
from tests.engine.results.report_specs import demo_with_questionnaire, sweep_2x2


def _in_process(job: Callable[[InProcessShell], Coroutine[Any, Any, Any]]) -> Any:
    return asyncio.run(job(InProcessShell()))


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    run_dir = tmp_path_factory.mktemp("report-demo") / "run"
    summary = _in_process(lambda shell: run_experiment(parse_spec(demo_with_questionnaire()), run_dir, shell))
    assert summary.status == "completed", summary.error
    return run_dir


@pytest.fixture(scope="module")
def sweep_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("report-sweep") / "sweep"
    _in_process(lambda shell: run_sweep(parse_spec(sweep_2x2((2, 3))), root, shell))
    assert [c["status"] for c in read_sweep(root)["cells"]] == ["completed"] * 4
    return root


def _panels(report: Any) -> dict[str, Any]:
    return {panel.key: panel for panel in report.panels}


def _scalar(reader: ReplayReader, sql: str) -> Any:
    return reader.query(sql).to_pylist()[0]["v"]


def _write_env_metrics(run_dir: Path, values: dict[int, float]) -> None:
    """Add an ``Economy`` module's ``gini`` series to a run's ``env_metrics``, as its env step would."""
    for step, value in values.items():
        rows = [{"run": "r", "step": step, "t": datetime(2026, 3, 2, 8 + step), "module": "Economy",
                 "metric": "gini", "value": value, "description": "Gini coefficient of wealth"}]
        ReplayWriter(run_dir).write_shard(ENV_METRICS, shard_name(step, "economy"), rows)


def test_a_run_has_every_per_tick_series_and_they_add_up_to_its_datasets(demo_run: Path) -> None:
    report = load_report(demo_run)
    panels = _panels(report)
    assert list(panels)[:8] == ["agent_steps", "llm_calls", "tokens", "cost", "latency", "prompt_p95", "prefix_share", "tick_duration"]
    with ReplayReader(demo_run) as reader:
        calls = _scalar(reader, "SELECT count(*) AS v FROM llm_calls")
        tokens_in = _scalar(reader, "SELECT sum(input_tokens)::BIGINT AS v FROM llm_calls")
    assert sum(sum(line.y) for line in panels["agent_steps"].lines) == 60
    assert all(line.x == (1, 2, 3) for line in panels["agent_steps"].lines)  # a status absent from a tick counts 0 there
    assert {line.label for line in panels["agent_steps"].lines} <= {"finished", "turn_limit", "error", "llm_error"}
    assert sum(panels["llm_calls"].lines[0].y) == calls
    assert [line.label for line in panels["tokens"].lines] == ["input", "output"]
    assert sum(panels["tokens"].lines[0].y) == tokens_in
    assert [line.label for line in panels["latency"].lines] == ["p50", "p95"]
    p50, p95 = panels["latency"].lines
    assert all(a <= b for a, b in zip(p50.y, p95.y, strict=True))
    (ticks,) = panels["tick_duration"].lines
    assert ticks.x == (1, 2, 3) and all(seconds > 0 for seconds in ticks.y)
    with ReplayReader(demo_run) as reader:  # the token telemetry's p95, by tier, as the dataset has it
        p95 = reader.query("SELECT tier, step, prompt_p95 FROM token_telemetry WHERE tier != 'total' AND prompt_p95 IS NOT NULL "
                           "ORDER BY tier, step").to_pylist()
    assert {line.label: list(zip(line.x, line.y, strict=True)) for line in panels["prompt_p95"].lines} == {
        tier: [(r["step"], r["prompt_p95"]) for r in p95 if r["tier"] == tier] for tier in {r["tier"] for r in p95}}


def test_a_run_without_env_metrics_rows_has_no_env_section(demo_run: Path, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(demo_run, run_dir)
    shutil.rmtree(RunLayout(run_dir).replay / "env_metrics")
    assert {panel.group for panel in load_report(run_dir).panels} == {"Run", "Questionnaire mood"}


def test_questionnaire_answers_are_counted_per_question(demo_run: Path) -> None:
    panels = _panels(load_report(demo_run))
    happy, plan = panels["answers.mood.1.happy"], panels["answers.mood.1.plan"]
    assert happy.bars and plan.bars
    assert sum(happy.lines[0].y) == 20 and sum(plan.lines[0].y) == 20  # every agent answered once (or '(invalid)')
    assert set(plan.lines[0].x) <= {"home", "out", "(invalid)"}
    numbers = [x for x in happy.lines[0].x if x != "(invalid)"]
    assert numbers == sorted(numbers, key=int) and {int(x) for x in numbers} <= {1, 2, 3, 4, 5}
    assert plan.description == "Stay home or go out tonight?"  # the question as it was asked


def test_a_choice_questions_bars_keep_its_scale_order_and_show_every_option() -> None:
    rows = [{"cell": 0, "questionnaire_id": "q", "step_index": 0, "question_id": "agree", "answer": answer, "value": 1.0}
            for answer in ("strongly agree", "agree", "disagree", "(invalid)")]
    scale = ["strongly disagree", "disagree", "neither", "agree", "strongly agree"]
    (panel,) = answer_panels(rows, None, {(0, "agree"): {"prompt": "Do you agree?", "choices": scale}})
    assert list(panel.lines[0].x) == [*scale, "(invalid)"]  # the scale's order, not the alphabet's; unchosen at 0
    assert list(panel.lines[0].y) == [0.0, 1.0, 0.0, 1.0, 1.0, 1.0] and panel.description == "Do you agree?"


def test_the_summary_has_status_spec_usage_and_the_callers_facts(demo_run: Path) -> None:
    report = load_report(demo_run, extra={"owner": "lab-a", "experiment": "0123abcd"})
    summary = report.summary
    assert summary["status"] == "completed" and summary["owner"] == "lab-a"
    assert summary["agents"] == 20 and summary["steps"] == "run 3 × 3600 s; questionnaire mood"
    assert summary["ticks done"] == 3 and summary["agent-steps done"] == 60
    with ReplayReader(demo_run) as reader:
        assert summary["LLM calls"] == _scalar(reader, "SELECT count(*) AS v FROM llm_calls")
        assert summary["output tokens"] == _scalar(reader, "SELECT sum(output_tokens)::BIGINT AS v FROM llm_calls")
    assert summary["ticks' wall time (s)"] > 0
    assert report.errors == ()
    assert json.loads(json.dumps(report.to_json()))["summary"]["owner"] == "lab-a"


def test_the_summary_shows_the_manifests_polis_version_commit_and_served_models(demo_run: Path) -> None:
    manifest = read_json(demo_run / "MANIFEST.json")
    summary = load_report(demo_run).summary
    (requested, entry), = manifest["models"].items()
    served, count = next(iter(entry["served"].items()))

    assert summary["polis version"] == manifest["polis"]["version"]
    assert summary["polis commit"].startswith(manifest["polis"]["commit"][:12])
    assert summary["served models"].startswith(f"{requested}: {served} ×{count}")


def test_the_dataset_catalog_lists_every_dataset_with_its_columns(demo_run: Path) -> None:
    report = load_report(demo_run)
    with ReplayReader(demo_run) as reader:
        assert [d.name for d in report.datasets] == reader.datasets()
        actions = next(d for d in report.datasets if d.name == "actions")
        assert actions.rows == 60 and actions.description == reader.schema("actions").description
        assert [c["name"] for c in actions.columns] == [c.name for c in reader.schema("actions").columns]
        assert all(c["description"] for c in actions.columns)


def test_env_metrics_become_one_panel_per_module_metric_grouped_by_module(demo_run: Path, tmp_path: Path) -> None:
    panels = _panels(load_report(demo_run))
    with ReplayReader(demo_run) as reader:
        series = reader.query("SELECT module, metric, any_value(description) AS description, list(value ORDER BY step) AS y, "
                              "list(step ORDER BY step) AS x FROM env_metrics GROUP BY ALL").to_pylist()
    assert series and {r["module"] for r in series} == {"MessagingSpace"}
    for row in series:
        panel = panels[f"env.{row['module']}.{row['metric']}"]
        assert (panel.group, panel.title, panel.description) == (row["module"], row["metric"], row["description"])
        (line,) = panel.lines
        assert list(line.x) == row["x"] == [1, 2, 3] and list(line.y) == row["y"]
    run_dir = tmp_path / "run"
    shutil.copytree(demo_run, run_dir)
    _write_env_metrics(run_dir, {1: 0.3, 2: 0.5, 3: 0.4})
    gini = _panels(load_report(run_dir))["env.Economy.gini"]
    assert gini.group == "Economy" and gini.lines[0].y == (0.3, 0.5, 0.4)
    assert gini.description == "Gini coefficient of wealth"


def test_a_sweep_has_one_line_per_cell_in_every_series(sweep_root: Path) -> None:
    report = load_report(sweep_root)
    assert report.is_sweep and len(report.cells) == 4
    assert report.summary["status"] == "4 completed" and report.summary["cells"] == 4
    panels = _panels(report)
    labels = [cell["label"] for cell in report.cells]
    assert labels[0] == "cell 0: temperature=0.2, count=2"
    for key in ("llm_calls", "cost", "tick_duration", "tokens.input", "latency.p95"):
        assert [line.label for line in panels[key].lines] == labels, key
    with ReplayReader(sweep_root) as reader:
        per_cell = {r["cell"]: r["n"] for r in reader.query("SELECT cell, count(*) AS n FROM llm_calls GROUP BY cell").to_pylist()}
        steps = {r["cell"]: r["n"] for r in reader.query("SELECT cell, count(*) AS n FROM actions GROUP BY cell").to_pylist()}
    assert [sum(line.y) for line in panels["llm_calls"].lines] == [per_cell[i] for i in range(4)]
    finished = [p for k, p in panels.items() if k.startswith("agent_steps")]
    assert all([line.label for line in p.lines] == labels for p in finished)  # a status a cell never had counts 0
    assert sum(sum(line.y) for p in finished for line in p.lines) == sum(steps.values()) == 3 * (2 + 3 + 2 + 3)
    plan = panels["answers.mood.1.plan"]
    assert [line.label for line in plan.lines] == labels
    assert all(x[1] == f"cell {i}" for i, line in enumerate(plan.lines) for x in line.x)
    assert [sum(line.y) for line in plan.lines] == [2, 3, 2, 3]


def test_a_sweeps_env_metrics_have_one_line_per_cell(sweep_root: Path, tmp_path: Path) -> None:
    root = tmp_path / "sweep"
    shutil.copytree(sweep_root, root)
    for index in range(4):
        _write_env_metrics(cell_dir(root, index), {1: float(index), 2: float(index + 1)})
    report = load_report(root)
    panel = _panels(report)["env.Economy.gini"]
    assert [line.label for line in panel.lines] == [cell["label"] for cell in report.cells]
    assert [line.y for line in panel.lines] == [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0), (3.0, 4.0)]
    sent = _panels(report)["env.MessagingSpace.messages_sent"]  # the module's own series, one line per cell
    assert len(sent.lines) == 4 and all(line.x == (1, 2, 3) for line in sent.lines)


def test_a_directory_that_holds_no_run_is_refused(tmp_path: Path) -> None:
    with pytest.raises(NotARunError, match="not a run directory"):
        load_report(tmp_path)


def test_a_forks_summary_names_its_parent_and_tick(demo_run: Path, tmp_path: Path) -> None:
    fork = tmp_path / "fork"
    shutil.copytree(demo_run, fork)
    manifest = read_json(fork / "MANIFEST.json")
    atomic_write_json(fork / "MANIFEST.json", {**manifest, "fork": {"parent": "/home/ana/private/runs/parent", "at_step": 2}})
    assert load_report(fork).summary["forked from"] == "parent at tick 2"  # by name: no local path on a page
    assert "/home/ana" not in json.dumps(load_report(fork).to_json())
    assert "forked from" not in load_report(demo_run).summary


def test_a_network_runs_report_has_its_cascades_degrees_measures_and_fit(tmp_path: Path) -> None:
    from tests.engine.network.test_cascade_runs import LATEST

    spec = parse_spec({
        "name": "social", "seed": 5, "population": [{"count": 300}],
        "llm": {"default": {"model": "sim/social", "extra": {"social": {"post": 0.3, "repost": 0.4, "like": 0.1}}}},
        "network": {"layers": {"follow": {"generate": {"model": "barabasi_albert", "m": 2}}}},
        "environment": {"modules": [{"type": "SocialMediaSpace", "network": {"follows": "follow"}}]},
        "steps": [{"type": "run", "num_steps": 2, "tick": 3600}]})
    summary = _in_process(lambda shell: run_experiment(spec, tmp_path / "run", shell))
    assert summary.status == "completed", summary.error
    report = load_report(tmp_path / "run")
    panels = _panels(report)
    with ReplayReader(tmp_path / "run") as reader:
        sizes = [r["size"] for r in reader.query(LATEST).to_pylist()]
        ends = "(SELECT source AS a FROM network_edges WHERE step = 0 UNION ALL SELECT target FROM network_edges WHERE step = 0)"
        linked = _scalar(reader, f"SELECT count(DISTINCT a) AS v FROM {ends}")
        fewest = _scalar(reader, f"SELECT min(k) AS v FROM (SELECT count(*) AS k FROM {ends} GROUP BY a)")
    ccdf = panels["network.cascades"].lines[0]
    assert ccdf.x[0] == 1 and ccdf.y[0] == 1.0 and ccdf.x[-1] == max(sizes)  # every cascade has size 1 or more
    assert ccdf.y[-1] == pytest.approx(sizes.count(max(sizes)) / len(sizes)) and panels["network.cascades"].log
    (follow,) = panels["network.degrees"].lines
    assert follow.label == "follow (degree)" and follow.x[0] == fewest and follow.y[0] == 1.0 and linked == 300  # each has a link
    edges = panels["network.edges"].lines[0]
    assert edges.label == "follow" and edges.x == (1, 2)
    fit = {row["measure"]: row for row in report.network_fit}
    assert fit["components"]["target"] == 1.0 and fit["edges"]["achieved"] == _scalar_edges(tmp_path / "run")
    again = type(report).from_json(json.loads(json.dumps(report.to_json())))
    assert again.network_fit == report.network_fit and _panels(again)["network.cascades"].log


def _scalar_edges(run: Path) -> float:
    with ReplayReader(run) as reader:
        return float(_scalar(reader, "SELECT count(*) AS v FROM network_edges WHERE step = 0"))


def test_a_traceback_on_the_page_names_files_from_their_package_never_the_servers_path() -> None:
    from engine.results.report import without_local_paths

    text = ('RunError: an agent-step crashed its batch: KeyError: 3\nTraceback (most recent call last):\n'
            '  File "/home/ana/src/polis/engine/society/workspaces/packed.py", line 67, in read\n'
            '  File "/usr/lib/python3.11/asyncio/tasks.py", line 3, in run\n'
            '  File "/srv/venv/lib/python3.11/site-packages/duckdb/query.py", line 1, in q\nKeyError: 3')
    shown = without_local_paths(text)
    assert shown is not None and "/home" not in shown and "/usr" not in shown and "/srv" not in shown
    assert 'File "engine/society/workspaces/packed.py", line 67' in shown and 'File "duckdb/query.py"' in shown
    assert 'File "tasks.py", line 3' in shown and shown.endswith("KeyError: 3") and without_local_paths(None) is None
