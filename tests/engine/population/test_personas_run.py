"""The shipped persona example runs (in this process): one agent per sampled row, one action per persona per step."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from engine.society.run.runner import run_experiment
from engine.society.workspaces.manifest import agent_workspace
from engine.spec import load_spec
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import RunLayout

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


async def test_the_persona_example_makes_one_action_per_persona_per_step(shell, tmp_path: Path):
    spec = load_spec(EXAMPLES / "personas.yaml")
    run = tmp_path / "run"
    summary = await run_experiment(spec, run, shell)
    assert summary.status == "completed", summary.error
    with ReplayReader(run) as reader:
        actions = reader.query("SELECT agent_id, step, count(*) AS n FROM actions GROUP BY agent_id, step").to_pylist()
    assert sorted((a["agent_id"], a["step"]) for a in actions) == [(i, s) for i in range(16) for s in range(1, spec.total_ticks() + 1)]
    assert all(a["n"] == 1 for a in actions)
    # Each agent's workspace holds the profile of one distinct row of the table, with the listed columns only.
    with (EXAMPLES / "personas.csv").open(newline="") as handle:
        table = {row["name"]: row for row in csv.DictReader(handle)}
    ids = [spec["id"] for spec in json.loads(RunLayout(run).society_file.read_text())["agent_specs"]]
    profiles = [agent_workspace(run, i).read_json("config.json")["profile"] for i in ids]  # type: ignore[union-attr]
    assert len(profiles) == 16 and len({p["name"] for p in profiles}) == 16
    for profile in profiles:
        row = table[profile["name"]]
        assert profile == {key: int(row[key]) if key == "age" else row[key] for key in spec.population[0].columns or ()}
