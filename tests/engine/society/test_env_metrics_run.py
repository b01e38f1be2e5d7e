"""``env_metrics`` in a real run: one row per module metric per step, committed with its tick, agreeing with the
modules' own datasets."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from engine.env.modules.economy import EconomySpace
from engine.env.modules.messaging import MessagingSpace
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader

AGENTS = 8
TICKS = 3
TICK = 600
START = datetime(2026, 3, 2, 8, 0)
GOODS = {"bread": 2.5, "coat": 40.0}


def _spec() -> object:
    return parse_spec({
        "name": "env-metrics",
        "seed": 5,
        "start_time": START.isoformat(),
        "llm": {"default": {"model": "sim/default"}},
        "population": [{"count": AGENTS, "profile_template": {"name": "P{i}"},
                        "config": {"tools": ["ask_env"], "max_react_turns": 2}}],
        "environment": {"modules": [{"type": "MessagingSpace", "kwargs": {"groups": {"club": [0, 1, 2, 3]}}},
                                    {"type": "EconomySpace", "kwargs": {"goods": GOODS, "salaries": {"0": 10.0}}}],
                        "router": "codegen"},
        "steps": [{"type": "run", "num_steps": TICKS, "tick": TICK}],
        "batch_size": 4,
    })


async def test_env_metrics_has_one_row_per_module_metric_per_step(shell, tmp_path: Path) -> None:
    run = tmp_path / "run"
    summary = await run_experiment(_spec(), run, shell)
    assert summary.status == "completed", summary.error

    with ReplayReader(run) as reader:
        columns = [(c.name, c.type) for c in reader.schema("env_metrics").columns]
        rows = reader.query("SELECT * FROM env_metrics ORDER BY step, module, metric").to_pylist()
        runs = {r["run"] for r in reader.query("SELECT DISTINCT run FROM llm_calls").to_pylist()}
        sent = {r["step"]: r["n"] for r in reader.query(
            "SELECT step, count(*) AS n FROM messages WHERE kind IN ('direct', 'group') GROUP BY step").to_pylist()}
        economy = {r["step"]: r for r in reader.query("SELECT step, spending, income, gini FROM economy_state").to_pylist()}

    assert columns == [("run", "string"), ("step", "int64"), ("t", "timestamp"), ("module", "string"), ("metric", "string"),
                       ("value", "float64"), ("description", "string")]
    declared = {"MessagingSpace": MessagingSpace().metric_descriptions(), "EconomySpace": EconomySpace(goods=GOODS).metric_descriptions()}
    expected = sorted((step, module, metric) for step in range(1, TICKS + 1) for module, names in declared.items() for metric in names)
    assert [(r["step"], r["module"], r["metric"]) for r in rows] == expected  # each once: no step written twice, none missing
    assert all(r["description"] == declared[r["module"]][r["metric"]] for r in rows)
    assert {r["run"] for r in rows} == runs and len(runs) == 1  # the run id the run's other rows carry
    assert all(r["t"] == START + timedelta(seconds=TICK * r["step"]) for r in rows)

    value = {(r["step"], r["module"], r["metric"]): r["value"] for r in rows}
    for step in range(1, TICKS + 1):
        assert value[(step, "MessagingSpace", "messages_sent")] == sent.get(step, 0)
        assert value[(step, "EconomySpace", "spending")] == economy[step]["spending"]
        assert value[(step, "EconomySpace", "income")] == economy[step]["income"] >= 10.0  # agent 0's salary, every step
        assert value[(step, "EconomySpace", "gini_wealth")] == economy[step]["gini"]
    assert sum(sent.values()) >= 3  # the agents did send messages, so the comparison above compares something
