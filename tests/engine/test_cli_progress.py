"""The progress line of ``polis run`` as a user sees it (a subprocess running in process, the simulated LLM)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from engine.cluster_options import IN_PROCESS
from engine.run_status import RunStatus
from engine.storage.run_layout import RunLayout


def test_the_progress_line_ends_on_budget_exhausted_when_a_tiny_budget_runs_out(tmp_path: Path):
    spec = {
        "name": "tiny-budget",
        "population": [{"count": 4, "config": {"max_react_turns": 1, "tools": ["finish"]}}],
        "steps": [{"type": "run", "num_steps": 3, "tick": 600}],
        "budget": {"max_calls": 5},  # tick 1 takes 4 calls, tick 2 runs out
        "batch_size": 2,
    }
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(spec))
    # Bytes, not text: universal newlines would turn the line's carriage returns into newlines.
    # --force: the estimate (13 calls) is past the cap, which is the point here
    run = subprocess.run([sys.executable, "-m", "engine.cli", "run", str(tmp_path / "spec.yaml"), "--run-dir", str(tmp_path / "run"),
                          "--force"],
                         capture_output=True, timeout=180, env={**os.environ, "POLIS_SCHEDULER": IN_PROCESS})
    stdout, stderr = run.stdout.decode(), run.stderr.decode()
    assert run.returncode == 1, stdout + stderr
    assert f"status: {RunStatus.BUDGET_EXHAUSTED}" in stdout

    # Each report rewrites the line after a carriage return; the last one names the end status
    # and closes the line.
    line = stderr[stderr.index("\r"):]
    reports = line.split("\r")[1:]
    assert reports[0].split()[-1] == RunStatus.STARTING
    assert reports[-1].split()[-1] == RunStatus.BUDGET_EXHAUSTED
    assert reports[-1].endswith("\n") and all(not r.endswith("\n") for r in reports[:-1])

    layout = RunLayout(tmp_path / "run")
    assert f"replay: {layout.replay}" in stdout
    for path in (layout.society_file, layout.society_step_file, layout.lease_file, layout.replay, layout.trace,
                 layout.root / "packs", layout.root / "workspaces", layout.env_snapshots, layout.llm_cache):
        assert path.exists(), path
