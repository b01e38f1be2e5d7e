"""Parameter sweeps: grid expansion (sans-IO), and a real sweep (in-process shell) read back as one SQL surface."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from engine.errors import RunError, SpecError
from engine.society.run.sweep import run_sweep
from engine.spec import parse_spec
from engine.storage.atomic import read_json
from engine.storage.reader import ReplayReader
from engine.storage.sweep_layout import SweepLog, read_sweep
from engine.sweep import check_sweep_values, derive_seed, expand_sweep

TEMPERATURE = "llm.default.options.temperature"
COUNT = "population.0.count"


def _spec_data(sweep: dict[str, Any] | None = None, **overrides: Any) -> dict[str, Any]:
    """A tiny demo-like spec: 3 people in a messaging space, 1 tick, on the simulated LLM."""
    data: dict[str, Any] = {
        "name": "tiny-sweep",
        "seed": 11,
        "start_time": "2026-03-02T08:00:00",
        "llm": {"default": {"model": "sim/default"}},
        "population": [{
            "count": 3,
            "profile_template": {"name": "Resident {i}", "occupation": ["teacher", "nurse", "student"]},
            "config": {"max_react_turns": 2},
        }],
        "environment": {"router": "codegen", "modules": [{"type": "MessagingSpace"}]},
        "steps": [{"type": "run", "num_steps": 1, "tick": 3600}],
        "sweep": sweep,
        **overrides,
    }
    return data


GRID_2X2 = {"grid": {TEMPERATURE: [0.0, 1.0], COUNT: [2, 3]}, "replications": 2}


def test_two_by_two_grid_with_two_replications_expands_to_eight_cells_in_stable_order():
    cells = expand_sweep(parse_spec(_spec_data(GRID_2X2)))

    assert [c.index for c in cells] == list(range(8))
    assert [c.cell_id for c in cells] == [f"cell-{i:04d}" for i in range(8)]
    # First grid key varies slowest, replication fastest.
    assert [(c.params[TEMPERATURE], c.params[COUNT], c.replication) for c in cells] == [
        (t, n, r) for t in (0.0, 1.0) for n in (2, 3) for r in (0, 1)
    ]


def test_cell_seeds_are_recorded_on_the_cell_spec_stable_and_distinct():
    spec = parse_spec(_spec_data(GRID_2X2))
    first, second = expand_sweep(spec), expand_sweep(spec)

    assert [c.seed for c in first] == [c.seed for c in second]
    assert len({c.seed for c in first}) == 8
    assert all(c.spec.seed == c.seed for c in first)
    assert all(0 <= c.seed < 2**31 for c in first)
    assert first[0].seed == derive_seed(11, {TEMPERATURE: 0.0, COUNT: 2}, 0)
    other_base = expand_sweep(parse_spec(_spec_data(GRID_2X2, seed=12)))
    assert {c.seed for c in other_base}.isdisjoint({c.seed for c in first})


def test_seed_depends_on_base_seed_params_replication_and_salt():
    base = derive_seed(1, {"a": 1}, 0)
    assert base == derive_seed(1, {"a": 1}, 0)
    assert len({base, derive_seed(2, {"a": 1}, 0), derive_seed(1, {"a": 2}, 0), derive_seed(1, {"a": 1}, 1),
                derive_seed(1, {"a": 1}, 0, salt=1)}) == 5


def test_params_are_applied_to_each_cell_spec_and_the_sweep_removed():
    sweep = {"grid": {TEMPERATURE: [0.3], COUNT: [5], "population.*.config.max_react_turns": [1],
                      "environment.router": ["react"]}}
    (cell,) = expand_sweep(parse_spec(_spec_data(sweep)))

    assert cell.spec.llm.default.options == {"temperature": 0.3}
    assert cell.spec.population[0].count == 5 and len(cell.spec.all_agents()) == 5
    assert cell.spec.population[0].config == {"max_react_turns": 1}
    assert cell.spec.environment.router == "react"
    assert cell.spec.sweep is None
    assert cell.spec.name == "tiny-sweep-cell-0000"
    assert cell.run_dir(Path("/r")) == Path("/r/cells/cell=0000")


def test_replications_without_a_grid_give_one_cell_per_replication():
    cells = expand_sweep(parse_spec(_spec_data({"replications": 3})))

    assert [(c.params, c.replication) for c in cells] == [({}, 0), ({}, 1), ({}, 2)]
    assert len({c.seed for c in cells}) == 3


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("llm.default.temperature", "llm.default has no field 'temperature'"),
        ("population.4.count", "'4' is neither an index below 1 nor '*'"),
        ("agents.*.config.x", "agents is empty, so '*' matches nothing"),
        ("llm.coder.model", "llm.coder is not set"),
        ("environment.router.kind", "environment.router is a str value"),
        ("population.0.config.*", "'*' ranges over list elements only"),
        ("populations.0.count", "the spec has no field 'populations'"),
        ("seed", "derived from the spec's seed"),
        ("population..count", "is not a dotted path"),
    ],
)
def test_grid_key_that_does_not_resolve_is_a_spec_error_naming_the_key(key, why):
    with pytest.raises(SpecError) as caught:
        parse_spec(_spec_data({"grid": {key: [1]}}))

    assert caught.value.path == "sweep"
    assert f"grid key {key!r}" in str(caught.value)
    assert why in str(caught.value)


def test_empty_value_list_and_overlapping_keys_are_rejected():
    with pytest.raises(SpecError, match=r"sweep.grid: grid key 'population.0.count' has an empty list"):
        parse_spec(_spec_data({"grid": {COUNT: []}}))
    with pytest.raises(SpecError, match="'population.\\*.count' and 'population.0' overlap"):
        parse_spec(_spec_data({"grid": {"population.*.count": [1], "population.0": [{"count": 1}]}}))


def test_grid_value_that_breaks_the_spec_names_the_cell_and_its_field():
    spec = parse_spec(_spec_data({"grid": {COUNT: [2, 0]}}))

    with pytest.raises(SpecError, match=r"sweep cell-0001 \(population.0.count=0\) is not a valid spec") as caught:
        expand_sweep(spec)
    assert caught.value.path == "population.0.count"


def test_each_grid_value_is_checked_once_before_any_cell_is_expanded():
    grid = {"environment.modules.0.kwargs.groups": [{"all": [0, 1]}, 5], COUNT: [2, 3]}
    with pytest.raises(SpecError, match=r"sweep value \(environment.modules.0.kwargs.groups=5\) is not a valid spec") as caught:
        check_sweep_values(parse_spec(_spec_data({"grid": grid})))
    assert caught.value.path == "environment.modules.0.kwargs.groups"
    check_sweep_values(parse_spec(_spec_data({"grid": {COUNT: [2, 3]}})))


async def test_sweep_cells_run_concurrently_and_one_query_compares_them(shell, tmp_path):
    root = tmp_path / "sweep"
    summary = await run_sweep(parse_spec(_spec_data(GRID_2X2)), root, shell)

    assert summary.statuses() == {"completed": 8}, [r.error for r in summary.runs]
    manifest = read_sweep(root)
    assert [c["status"] for c in manifest["cells"]] == ["completed"] * 8
    assert {c["status"] for c in read_json(root / "SWEEP.json")["cells"]} == {"pending"}  # written once, at the start
    assert [c["run_dir"] for c in manifest["cells"]] == [f"cells/cell={i:04d}" for i in range(8)]
    assert manifest["grid"] == GRID_2X2["grid"] and manifest["replications"] == 2
    with ReplayReader(root) as reader:
        groups = reader.query(
            "SELECT cell, replication, seed, param_llm_default_options_temperature AS temperature, "
            "param_population_0_count AS agents, count(*) AS n, count(DISTINCT agent_id) AS distinct_agents "
            "FROM actions GROUP BY ALL ORDER BY cell"
        ).to_pylist()
        cells = reader.query("SELECT cell, seed, status FROM cells ORDER BY cell").to_pylist()

    assert len(groups) == 8
    assert [(g["temperature"], g["agents"], g["replication"]) for g in groups] == [
        (t, n, r) for t in (0.0, 1.0) for n in (2, 3) for r in (0, 1)
    ]
    assert all(g["n"] == g["agents"] == g["distinct_agents"] for g in groups)  # one row per agent, one tick
    assert len({g["seed"] for g in groups}) == 8
    assert [g["seed"] for g in groups] == [c["seed"] for c in manifest["cells"]] == [c.seed for c in summary.cells]
    assert cells == [{"cell": i, "seed": c.seed, "status": "completed"} for i, c in enumerate(summary.cells)]


async def test_a_failing_cell_does_not_stop_the_others(shell, tmp_path):
    # The second cell names agent 0 twice: its environment module fails to build (a spec check could not know).
    grid = {"environment.modules.0.kwargs.agent_id_name_pairs": [[[0, "Ann"]], [[0, "Ann"], [0, "Bo"]]]}
    root = tmp_path / "sweep"
    summary = await run_sweep(parse_spec(_spec_data({"grid": grid})), root, shell)

    assert [r.status for r in summary.runs] == ["completed", "failed"]
    assert summary.runs[1].error
    cells = read_sweep(root)["cells"]
    assert [(c["status"], c["error"] is None) for c in cells] == [("completed", True), ("failed", False)]
    with ReplayReader(root) as reader:
        assert reader.query("SELECT DISTINCT cell FROM actions").to_pylist() == [{"cell": 0}]
        params = reader.query("SELECT param_environment_modules_0_kwargs_agent_id_name_pairs AS g FROM cells ORDER BY cell")
        assert params.column("g").to_pylist() == ['[[0, "Ann"]]', '[[0, "Ann"], [0, "Bo"]]']
    with pytest.raises(RunError, match="already holds a sweep"):
        await run_sweep(parse_spec(_spec_data({"grid": grid})), root, shell)


async def test_a_resumed_sweep_keeps_completed_cells_and_finishes_the_rest(shell, tmp_path):
    spec = parse_spec(_spec_data({"grid": {COUNT: [2, 3]}, "replications": 1}))
    root = tmp_path / "sweep"
    first = await run_sweep(spec, root, shell)
    assert first.statuses() == {"completed": 2}
    # As if the driver had died while cell 1 was still pending: its directory never got made.
    SweepLog(root).record(1, status="running", summary=None)
    shutil.rmtree(root / "cells" / "cell=0001")
    kept = (root / "cells" / "cell=0000" / "SOCIETY_STEP.json").read_text()

    resumed = await run_sweep(spec, root, shell, resume=True)
    assert resumed.statuses() == {"completed": 2}
    assert (root / "cells" / "cell=0000" / "SOCIETY_STEP.json").read_text() == kept  # not run again
    with ReplayReader(root) as reader:
        rows = reader.query("SELECT cell, count(*) AS n FROM actions GROUP BY cell ORDER BY cell").to_pylist()
    assert rows == [{"cell": 0, "n": 2}, {"cell": 1, "n": 3}]
    with pytest.raises(SpecError, match="differs"):
        await run_sweep(parse_spec(_spec_data({"grid": {COUNT: [2, 4]}})), root, shell, resume=True)


async def test_max_concurrent_cells_bounds_the_cells_running_at_once(shell, tmp_path):
    data = _spec_data({"grid": {COUNT: [2, 3]}, "replications": 2, "max_concurrent_cells": 1})
    running: set[int] = set()
    most = 0

    def on_progress(cell, progress) -> None:  # noqa: ANN001
        nonlocal most
        if progress.status in ("starting", "running"):
            running.add(cell.index)
        else:
            running.discard(cell.index)
        most = max(most, len(running))

    summary = await run_sweep(parse_spec(data), tmp_path / "sweep", shell, on_progress=on_progress)
    assert summary.statuses() == {"completed": 4}
    assert most == 1


def _counting_parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    import engine.sweep

    calls: list[int] = []
    real = engine.sweep.parse_spec

    def parse(data: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(data, **kwargs)

    monkeypatch.setattr(engine.sweep, "parse_spec", parse)
    return calls


def test_ten_thousand_grid_values_over_a_large_table_parse_the_whole_spec_a_few_times_not_once_each(monkeypatch):
    rows = [{"name": f"P{i}", "age": 20 + i % 60} for i in range(20_000)]
    temperatures = [round(i / 10_000, 4) for i in range(10_000)]
    data = _spec_data({"grid": {TEMPERATURE: temperatures}}, population=[{"rows": rows, "count": 2}])
    spec = parse_spec(data)
    parses = _counting_parses(monkeypatch)
    check_sweep_values(spec)
    assert 1 <= len(parses) <= 3  # the least and greatest value (0.0 is the first of its kind)


def test_a_bad_value_among_many_valid_ones_is_still_found_by_its_part_of_the_spec(monkeypatch):
    turns = [1 + i % 5 for i in range(5_000)]
    turns[3_333] = 0  # max_react_turns must be >= 1
    spec = parse_spec(_spec_data({"grid": {"population.0.config.max_react_turns": turns}}))
    parses = _counting_parses(monkeypatch)
    with pytest.raises(SpecError, match=r"max_react_turns=0") as caught:
        check_sweep_values(spec)
    assert caught.value.path.startswith("population.0.config") and len(parses) <= 3


def test_a_value_of_a_union_member_its_part_cannot_tell_is_parsed_whole_and_accepted():
    steps = [{"type": "run", "num_steps": 1, "tick": 3600}, {"type": "ask", "question": "How are you?"}]
    spec = parse_spec(_spec_data({"grid": {"steps.0": steps}}))
    check_sweep_values(spec)
    assert [cell.spec.steps[0].type for cell in expand_sweep(spec)] == ["run", "ask"]


def test_a_grid_key_of_too_many_kinds_of_value_is_refused_at_its_key():
    kinds = [{f"k{i}": 1} for i in range(40)]
    spec = parse_spec(_spec_data({"grid": {"environment.modules.0.kwargs.groups": kinds}}))
    with pytest.raises(SpecError, match="more than 32 kinds") as caught:
        check_sweep_values(spec)
    assert caught.value.path == "sweep.grid.environment.modules.0.kwargs.groups"
