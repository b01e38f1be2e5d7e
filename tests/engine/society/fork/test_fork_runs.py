"""Forks at a kept tick, through the CLI and fork_experiment (in-process): the shared past costs nothing, the parent never changes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.cluster_options import IN_PROCESS
from engine.errors import ForkError
from engine.society.fork.run import fork_experiment
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.atomic import read_json
from engine.storage.reader import ReplayReader
from tests.engine.society.crash_support import final_state
from tests.engine.society.fork.fork_support import (
    AGENTS,
    NOTICE,
    TOLD,
    file_hashes,
    fork_parent_spec,
    intervening_llm,
    intervention_patch,
)


def polis(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "POLIS_SCHEDULER": IN_PROCESS}
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=170)


def rows(run: Path, sql: str) -> list[dict]:
    with ReplayReader(run) as reader:
        return reader.query(sql).to_pylist()


@pytest.fixture(scope="module")
def parent(tmp_path_factory) -> Path:
    """A finished 4-tick seeded run on the in-process sim (``polis run``), every tick kept."""
    root = tmp_path_factory.mktemp("fork")
    (root / "spec.yaml").write_text(yaml.safe_dump(fork_parent_spec()), encoding="utf-8")
    done = polis("run", "spec.yaml", "--run-dir", "parent", cwd=root)
    assert done.returncode == 0, done.stdout + done.stderr
    return root / "parent"


def test_a_fork_at_tick_2_without_changes_ends_like_its_parent_with_no_provider_call(parent: Path, tmp_path: Path) -> None:
    before = file_hashes(parent)
    done = polis("run", "--fork-from", str(parent), "--at-step", "2", "--run-dir", str(tmp_path / "fork"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"fork of {parent} at tick 2: {AGENTS} workspaces" in done.stdout
    fork = tmp_path / "fork"
    assert final_state(fork) == final_state(parent)  # rows, workspaces, env state
    assert rows(fork, "SELECT count(*) AS n FROM llm_calls WHERE step > 2 AND NOT cached") == [{"n": 0}]
    assert rows(fork, "SELECT count(*) AS n FROM llm_calls WHERE step > 2") != [{"n": 0}]
    # the past is the parent's own rows: same call ids, same run ids
    past = "SELECT run, call_id FROM llm_calls WHERE step <= 2 ORDER BY call_id"
    assert rows(fork, past) == rows(parent, past)
    society = read_json(fork / "SOCIETY.json")
    assert society["fork"]["parent"] == str(parent.resolve()) and society["fork"]["at_step"] == 2
    assert society["fork"]["parent_spec_hash"] == read_json(parent / "SOCIETY.json")["spec_hash"]
    assert file_hashes(parent) == before


async def test_a_fork_with_an_intervention_at_tick_2_differs_from_its_parent_only_after_tick_2(shell, tmp_path: Path) -> None:
    with intervening_llm() as llm:
        spec = fork_parent_spec(llm)
        summary = await run_experiment(parse_spec(spec), tmp_path / "parent", shell)
        assert summary.status == "completed", summary.error
        before = file_hashes(tmp_path / "parent")
        made, forked = await fork_experiment(tmp_path / "parent", 2, tmp_path / "fork", shell, patch=intervention_patch())
    assert forked.status == "completed", forked.error
    assert made.agents == AGENTS and made.workspace_bytes > 0
    parent, fork = tmp_path / "parent", tmp_path / "fork"
    assert file_hashes(parent) == before

    actions = "SELECT agent_id, step, status, summary, tools_called, llm_calls FROM actions WHERE step {} ORDER BY agent_id, step"
    assert rows(fork, actions.format("<= 2")) == rows(parent, actions.format("<= 2"))
    assert rows(fork, actions.format("> 2")) != rows(parent, actions.format("> 2"))
    told = rows(fork, "SELECT recipient, content FROM messages WHERE kind = 'system' ORDER BY recipient")
    assert [(r["recipient"], r["content"]) for r in told] == [(agent, NOTICE) for agent in TOLD]
    assert rows(parent, "SELECT count(*) AS n FROM messages WHERE kind = 'system'") == [{"n": 0}]
    # the told agents saw the notice in their next prompt: new requests, so provider calls after tick 2
    assert rows(fork, "SELECT count(*) AS n FROM llm_calls WHERE step = 3 AND NOT cached AND agent_id IN (0, 1, 2)") != [{"n": 0}]
    queries = rows(fork, "SELECT kind, step, status FROM society_queries")
    assert queries == [{"kind": "intervene", "step": 2, "status": "ok"}]


async def test_only_kept_ticks_can_be_forked(shell, tmp_path: Path) -> None:
    # A folder per agent, whose step journals are what keeps a tick (packed runs: tests/engine/society/test_packed_runs.py).
    summary = await run_experiment(parse_spec({**fork_parent_spec(keep=1), "storage": {"workspaces": "dir"}}), tmp_path / "parent", shell)
    assert summary.status == "completed", summary.error
    parent = tmp_path / "parent"
    assert sorted(p.name for p in (parent / "env" / "_snapshots").iterdir()) == ["txn_000003", "txn_000004"]
    journals = sorted(p.name for p in (parent / "agents" / "agent_0000" / ".runtime" / "txn").glob("*.json"))
    assert journals == ["step_000004.json"]  # tick 3 as tick 4 began
    before = file_hashes(parent)
    with pytest.raises(ForkError, match="snapshots.keep"):
        await fork_experiment(parent, 2, tmp_path / "too-old", shell)
    assert not (tmp_path / "too-old").exists() and file_hashes(parent) == before
    for tick in (3, 4):
        made, forked = await fork_experiment(parent, tick, tmp_path / f"at-{tick}", shell,
                                             patch={"steps": [{"type": "run", "num_steps": 5, "tick": 3600}]})
        assert forked.status == "completed", forked.error
        assert rows(tmp_path / f"at-{tick}", "SELECT max(step) AS s, count(*) AS n FROM actions") == [{"s": 5, "n": 5 * AGENTS}]
    with pytest.raises(ForkError, match="not empty"):
        await fork_experiment(parent, 4, tmp_path / "at-4", shell)
    assert file_hashes(parent) == before


def test_the_cli_refuses_a_bad_patch_with_its_path_and_writes_nothing(parent: Path, tmp_path: Path) -> None:
    patch = tmp_path / "patch.yaml"
    patch.write_text(yaml.safe_dump({"population": [{"count": 2}]}), encoding="utf-8")
    done = polis("run", str(patch), "--fork-from", str(parent), "--at-step", "2", "--run-dir", str(tmp_path / "fork"), cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "population: a fork keeps the parent's agents" in done.stderr
    assert not (tmp_path / "fork").exists()
    done = polis("run", "--fork-from", str(parent), "--at-step", "7", "--run-dir", str(tmp_path / "fork"), cwd=tmp_path)
    assert done.returncode == 2 and "at_step: the parent committed 4 tick(s)" in done.stderr


def test_a_forks_manifest_and_status_name_its_parent(parent: Path, tmp_path: Path) -> None:
    done = polis("run", "--fork-from", str(parent), "--at-step", "3", "--run-dir", str(tmp_path / "fork"), cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = read_json(tmp_path / "fork" / "MANIFEST.json")
    assert manifest["fork"]["parent"] == str(parent.resolve()) and manifest["fork"]["at_step"] == 3
    assert read_json(parent / "MANIFEST.json")["fork"] is None
    status = polis("status", str(tmp_path / "fork"), cwd=tmp_path)
    assert f"forked from: {parent.resolve()} at tick 3" in status.stdout
