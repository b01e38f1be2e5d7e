"""Every command of ``polis``, fed what a user gets wrong, answers in one line starting ``polis`` and exits non-zero:
never a Python traceback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cluster_options import IN_PROCESS

ENV = {**os.environ, "POLIS_SCHEDULER": IN_PROCESS}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("broken")
    (root / "bad.yaml").write_text("name: [unclosed\n")
    (root / "typo.yaml").write_text("name: t\nagents: [{id: 1}]\nsteps: [{type: run, num_steps: 1}]\nllm: {default: {model: sim/socal}}\n")
    (root / "wrong.json").write_text(json.dumps({"name": "w", "agnets": [{"id": 1}], "steps": [{"type": "run", "num_steps": 1}]}))
    (root / "binary.yaml").write_bytes(b"\xff\xfe\x00garbage\x00")
    (root / "folder").mkdir()
    (root / "folder" / "notes.txt").write_text("x")
    (root / "tokens.json").write_text("{not json")
    return root


CASES = [
    ("run", ["run", "{root}/missing.yaml", "--run-dir", "{root}/r1"]),
    ("run", ["run", "{root}/bad.yaml", "--run-dir", "{root}/r2"]),
    ("run", ["run", "{root}/typo.yaml", "--run-dir", "{root}/r3"]),
    ("run", ["run", "{root}/wrong.json", "--run-dir", "{root}/r4"]),
    ("run", ["run", "{root}/binary.yaml", "--run-dir", "{root}/r5"]),
    ("run", ["run", "{root}/folder", "--run-dir", "{root}/r6"]),
    ("run", ["run", "--resume", "{root}/folder"]),
    ("run", ["run", "{root}/wrong.json"]),
    ("run", ["run", "--fork-from", "{root}/folder", "--at-step", "1", "--run-dir", "{root}/r7"]),
    ("run", ["run", "--batch-size", "many", "{root}/wrong.json"]),
    ("status", ["status", "{root}/folder"]),
    ("status", ["status", "{root}/nowhere"]),
    ("estimate", ["estimate", "{root}/missing.yaml"]),
    ("estimate", ["estimate", "{root}/typo.yaml"]),
    ("estimate", ["estimate", "{root}/bad.yaml", "--agents", "0"]),
    ("estimate", ["estimate", "{root}/wrong.json", "--ticks", "-1"]),
    ("query", ["query", "{root}/folder", "SELECT 1"]),
    ("fidelity", ["fidelity", "{root}/folder"]),
    ("fidelity", ["fidelity", "{root}/nowhere", "--retest", "x"]),
    ("workspace", ["workspace", "export", "{root}/folder", "3", "{root}/out"]),
    ("report", ["report", "{root}/folder", "-o", "{root}/page.html"]),
    ("sim-llm", ["sim-llm", "--port", "-5"]),
    ("serve", ["serve", "--data-dir", "{root}/tokens.json"]),
    ("token", ["token", "create", "--owner", "lab", "--file", "{root}/tokens.json"]),
]


@pytest.mark.parametrize(("command", "args"), CASES, ids=[f"{c}-{i}" for i, (c, _) in enumerate(CASES)])
def test_a_broken_input_gets_one_line_and_a_non_zero_exit(command: str, args: list[str], inputs: Path) -> None:
    argv = [a.replace("{root}", str(inputs)) for a in args]
    done = subprocess.run([sys.executable, "-m", "polis", *argv], capture_output=True, text=True, timeout=120, env=ENV)
    said = [line for line in done.stderr.splitlines() if line.startswith(("polis: ", f"polis {command}"))]
    assert done.returncode != 0, (argv, done.stdout, done.stderr)
    assert "Traceback" not in done.stderr and "Error:" not in done.stderr, done.stderr
    assert len(said) == 1 and len(said[0]) < 600, done.stderr  # one line says what is wrong, with no dump of internals
