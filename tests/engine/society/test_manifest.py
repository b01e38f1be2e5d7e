"""MANIFEST.json: versions, commit, seeds and the served models, from runs over ``polis sim-llm`` in its own process."""

from __future__ import annotations

import importlib.metadata
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from engine.cluster_options import IN_PROCESS
from engine.llm.sim.process import sim_llm_process
from engine.society.run.manifest import environment, read_manifest, served_changes
from engine.society.run.runner import run_experiment
from engine.society.run.sweep import run_sweep
from engine.spec import parse_spec
from engine.storage.atomic import read_json
from engine.storage.reader import ReplayReader

ROOT = Path(__file__).resolve().parents[3]
REQUESTED = "openai/gpt-asked"


def _spec(base_url: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "manifest",
        "seed": 17,
        "llm": {"default": {"model": REQUESTED, "base_url": base_url}},
        "population": [{"count": 4, "config": {"max_react_turns": 1, "tools": ["finish"]}}],
        "steps": [{"type": "run", "num_steps": 2, "tick": 600}],
        "batch_size": 2,
        **extra,
    }


def _served(models: dict[str, Any]) -> dict[str, Any]:
    return {name: (entry["served"], entry["fingerprints"]) for name, entry in models.items()}


def test_the_environment_names_this_checkouts_commit_python_and_package_versions() -> None:
    found = environment()
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)

    assert found["polis"]["version"] == importlib.metadata.version("polis")
    assert found["polis"]["commit"] == head.stdout.strip() and isinstance(found["polis"]["dirty"], bool)
    assert found["python"] == platform.python_version()
    assert found["packages"]["duckdb"] == importlib.metadata.version("duckdb")
    assert set(found["packages"]) >= {"dask", "distributed", "litellm", "pydantic", "pyarrow", "fastapi", "aiohttp"}


def test_served_changes_name_a_new_served_id_or_fingerprint_of_a_known_model_only() -> None:
    before = {"models": {"m": {"served": {"m-1": 5}, "fingerprints": {"fp_1": 5}}}}
    same = {"models": {"m": {"served": {"m-1": 9}, "fingerprints": {"fp_1": 9}},
                       "new": {"served": {"x": 1}, "fingerprints": {"null": 1}}}}
    moved = {"models": {"m": {"served": {"m-1": 5, "m-2": 4}, "fingerprints": {"fp_1": 5, "fp_2": 4}}}}

    assert served_changes(None, moved) == [] and served_changes(before, same) == []
    lines = served_changes(before, moved)
    assert len(lines) == 2 and "served model m-2" in lines[0] and "(m-1)" in lines[0] and "system_fingerprint fp_2" in lines[1]


async def test_the_manifest_carries_the_served_model_an_http_server_names_instead_of_the_requested_one(shell, tmp_path) -> None:
    with sim_llm_process(name="asked", seed=3, served_model="gpt-served-2026-11-30", fingerprint="fp_served") as server:
        spec = parse_spec(_spec(server.base_url))
        summary = await run_experiment(spec, tmp_path / "run", shell)
    assert summary.status == "completed", summary.error

    manifest = read_manifest(tmp_path / "run")
    assert manifest is not None
    assert manifest["spec_hash"] == spec.spec_hash() and manifest["seed"] == 17
    assert manifest["polis"]["commit"] and manifest["packages"]["distributed"]
    # 4 agents x 2 ticks, one decision each, and the env's world description once
    assert manifest["models"] == {REQUESTED: {"calls": 9, "cached": 0, "served": {"gpt-served-2026-11-30": 9},
                                              "fingerprints": {"fp_served": 9}}}
    with ReplayReader(tmp_path / "run") as reader:
        rows = reader.query("SELECT DISTINCT model, served_model, system_fingerprint FROM llm_calls").to_pylist()
    assert rows == [{"model": REQUESTED, "served_model": "gpt-served-2026-11-30", "system_fingerprint": "fp_served"}]


async def test_a_resume_served_by_another_model_warns_and_its_manifest_counts_both(shell, tmp_path) -> None:
    run_dir = tmp_path / "run"
    with sim_llm_process(name="asked", seed=3, served_model="snap-a", fingerprint="fp_a") as first:
        port = int(first.url.rsplit(":", 1)[1])
        # tick 1 (4 calls) and the world description use the 5 calls; tick 2 runs out
        summary = await run_experiment(parse_spec(_spec(first.base_url, budget={"max_calls": 5})), run_dir, shell)
    assert summary.status == "budget_exhausted" and summary.manifest_warnings == ()
    manifest = read_manifest(run_dir)
    assert manifest is not None and _served(manifest["models"]) == {REQUESTED: ({"snap-a": 5}, {"fp_a": 5})}

    # the same address now serves another snapshot: the resume (through the CLI, in its process) warns
    with sim_llm_process(port=port, name="asked", seed=3, served_model="snap-b", fingerprint="fp_b"):
        resumed = subprocess.run(
            [sys.executable, "-m", "engine.cli", "run", "--resume", str(run_dir), "--max-calls", "50"],
            capture_output=True, text=True, timeout=240, cwd=ROOT,
            env={**os.environ, "POLIS_SCHEDULER": IN_PROCESS, "PYTHONPATH": str(ROOT)},
        )
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr[-3000:]
    assert "status: completed" in resumed.stdout
    warning = [line for line in resumed.stderr.splitlines() if line.startswith("polis: warning: ")]
    assert len(warning) == 2, resumed.stderr[-3000:]
    assert "served model snap-b was not in the previous manifest (snap-a)" in warning[0]
    assert "system_fingerprint fp_b" in warning[1]
    manifest = read_manifest(run_dir)
    assert manifest is not None
    assert _served(manifest["models"]) == {REQUESTED: ({"snap-a": 5, "snap-b": 4}, {"fp_a": 5, "fp_b": 4})}


async def test_a_sweep_root_lists_its_cells_and_each_cell_has_its_own_manifest(shell, tmp_path) -> None:
    spec = parse_spec({
        "name": "manifest-sweep", "seed": 5,
        "population": [{"count": 2, "config": {"max_react_turns": 1, "tools": ["finish"]}}],
        "steps": [{"type": "run", "num_steps": 1, "tick": 600}],
        "sweep": {"grid": {"llm.default.options.temperature": [0.2, 0.9]}},
    })
    await run_sweep(spec, tmp_path / "sweep", shell)

    root = read_manifest(tmp_path / "sweep")
    assert root is not None and root["spec_hash"] == spec.spec_hash() and root["polis"]["version"]
    assert [(c["index"], c["params"]) for c in root["cells"]] == [
        (0, {"llm.default.options.temperature": 0.2}), (1, {"llm.default.options.temperature": 0.9})]
    for cell in root["cells"]:
        manifest = read_json(tmp_path / "sweep" / cell["manifest"])
        assert manifest["seed"] == cell["seed"] and manifest["spec_hash"] == cell["spec_hash"]
        assert manifest["models"]["sim/default"]["calls"] == 3  # 2 agents x 1 tick and the world description
