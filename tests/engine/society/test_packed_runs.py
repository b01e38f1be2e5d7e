"""Packed runs (``storage.workspaces: packed``), run in process: the same rows and workspaces as a
run with a folder per agent, a few files per tick instead of several per agent, and forks and as-of
reads that find a kept tick in its packs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.agent.workspace import DirWorkspace, workspace_path
from engine.errors import ForkError
from engine.society.fork.run import fork_experiment
from engine.society.run.runner import run_experiment
from engine.society.workspaces.manifest import export_as_of, read_manifest
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import run_store
from tests.engine.society.crash_support import final_state
from tests.engine.society.fork.fork_support import AGENTS, fork_parent_spec

#: Files of a folder run that a packed run does not keep (step journals, AGENT.json's version files, the call
#: texts a retried batch of a folder run re-emits), and the replay records, which hold each run's own ids and timings.
_FOLDER_ONLY = (".runtime/txn/", ".AGENT.json.v-", ".runtime/logs/step_texts.json", ".runtime/logs/step_replay.jsonl")


def spec(storage: str, **changes: Any) -> dict[str, Any]:
    base = fork_parent_spec(ticks=3)
    # No file tools: a folder run's `list` shows its step journals, so the two runs' agents would see different listings.
    base["population"][0]["config"] = {"max_react_turns": 3, "tools": ["ask_env", "todo_add", "memory_recent"]}
    return {**base, "storage": {"workspaces": storage}, **changes}


def files_of(ws: DirWorkspace) -> dict[str, bytes]:
    return {p: ws.read_bytes(p) for p in ws.files() if not any(p.startswith(skip) or skip in p for skip in _FOLDER_ONLY)}


def rows(run: Path, sql: str) -> list[dict[str, Any]]:
    with ReplayReader(run) as reader:
        return reader.query(sql).to_pylist()


async def test_a_packed_run_ends_like_a_folder_run_in_a_few_files_per_tick(shell, tmp_path: Path) -> None:
    for storage in ("dir", "packed"):
        summary = await run_experiment(parse_spec(spec(storage)), tmp_path / storage, shell)
        assert summary.status == "completed", summary.error
    folders, packed = tmp_path / "dir", tmp_path / "packed"
    state = final_state(packed)
    assert state == final_state(folders)  # rows, workspaces, env state
    assert len(state["actions"]) == AGENTS * 3

    assert not (packed / "agents").exists()
    status = json.loads((packed / "SOCIETY_STEP.json").read_text())
    manifest = read_manifest(run_store(packed), status["workspaces"])
    assert manifest.txn == 3 and sorted(manifest.where()) == list(range(AGENTS))
    batches = len(manifest.packs)  # batch_size 2: one pack per batch per tick (and per batch created), and a start marker
    assert len(list((packed / "packs").rglob("*.pack"))) == batches + 3 * batches
    assert len(list((packed / "packs").rglob("*.started"))) == 3 * batches
    # Exported, each workspace is byte for byte the folder run's (but the folder run's journals).
    export_as_of(run_store(packed), manifest, range(AGENTS), tmp_path / "export")
    for agent_id in range(AGENTS):
        exported = files_of(DirWorkspace(workspace_path(tmp_path / "export", agent_id)))
        assert exported == files_of(DirWorkspace(workspace_path(folders / "agents", agent_id)))
        assert "AGENT.json" in exported and ".runtime/logs/thread_messages.jsonl" in exported


async def test_a_fork_of_a_packed_run_links_its_packs_and_costs_no_provider_call_for_the_shared_past(shell, tmp_path: Path) -> None:
    parent = tmp_path / "parent"
    summary = await run_experiment(parse_spec(spec("packed")), parent, shell)
    assert summary.status == "completed", summary.error
    made, forked = await fork_experiment(parent, 1, tmp_path / "fork", shell)
    assert forked.status == "completed", forked.error
    assert made.agents == AGENTS and made.workspace_bytes > 0
    fork = tmp_path / "fork"
    assert final_state(fork) == final_state(parent)
    assert rows(fork, "SELECT count(*) AS n FROM llm_calls WHERE step > 1 AND NOT cached") == [{"n": 0}]
    tick_1 = next((parent / "packs" / "txn_000001").glob("*.pack"))  # a pack of tick 1 is the parent's own file
    assert (fork / tick_1.relative_to(parent)).stat().st_ino == tick_1.stat().st_ino


async def test_an_as_of_questionnaire_on_a_packed_run_answers_as_on_a_folder_run(shell, tmp_path: Path) -> None:
    question = {"type": "questionnaire", "questionnaire_id": "mood", "as_of_step": 1, "questions": [
        {"id": "happy", "prompt": "How happy are you (1-5)?", "response_type": "integer", "min": 1, "max": 5}]}
    answers = {}
    for storage in ("dir", "packed"):
        steps = [{"type": "run", "num_steps": 2, "tick": 3600}, question]
        summary = await run_experiment(parse_spec(spec(storage, steps=steps)), tmp_path / storage, shell)
        assert summary.status == "completed", summary.error
        answers[storage] = rows(tmp_path / storage, "SELECT agent_id, value_json, parse_success, as_of_step FROM "
                                                    "questionnaire_answers ORDER BY agent_id")
    assert len(answers["packed"]) == AGENTS and all(a["as_of_step"] == 1 and a["parse_success"] for a in answers["packed"])
    assert answers["packed"] == answers["dir"]


async def test_a_packed_run_keeps_only_the_packs_its_kept_ticks_read(shell, tmp_path: Path) -> None:
    run = tmp_path / "run"
    kept = spec("packed", snapshots={"keep": 1}, steps=[{"type": "run", "num_steps": 4, "tick": 3600}])
    kept["storage"]["checkpoint_every"] = 2
    summary = await run_experiment(parse_spec(kept), run, shell)
    assert summary.status == "completed", summary.error
    store = run_store(run)
    status = json.loads((run / "SOCIETY_STEP.json").read_text())
    last = read_manifest(store, status["workspaces"])
    tick_3 = read_manifest(store, "workspaces/txn_000003.json")
    assert all(store.exists(pack) for pack in (*last.reads, *tick_3.reads))
    left = {str(p.relative_to(run)) for p in (run / "packs").rglob("*.pack")}
    assert left == set(last.reads) | set(tick_3.reads)
    assert not any(p.startswith("packs/txn_000001/") for p in left)  # tick 1's packs: read by no kept tick
    with pytest.raises(ForkError, match="tick 2.* not kept.*snapshots.keep"):
        await fork_experiment(run, 2, tmp_path / "too-old", shell)
    made, forked = await fork_experiment(run, 3, tmp_path / "at-3", shell)
    assert forked.status == "completed" and made.agents == AGENTS
