"""Shared by the crash and recovery tests: a small spec, a driver subprocess, and the run's final state."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from engine.society.workspaces.manifest import agent_workspace
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import ENV_SNAPSHOT_DONE, SOCIETY_FILE, SOCIETY_STEP_FILE, env_snapshot_prefix, run_store

AGENTS = 6
QUESTIONS = 2


def crash_spec(*, ticks_after: int = 1, ticks_before: int = 2, seed: int = 11, storage: str = "dir") -> dict[str, Any]:
    """6 people messaging, ticks, a questionnaire, more ticks: every kind of transaction."""
    return {
        "name": "crash",
        "seed": seed,
        "start_time": "2026-03-02T08:00:00",
        "llm": {"default": {"model": "sim/default"}},
        "population": [{
            "count": AGENTS,
            "profile_template": {"name": "Resident {i}", "occupation": ["teacher", "nurse", "baker"]},
            "config": {"max_react_turns": 3},
        }],
        "environment": {"router": "codegen", "modules": [{"type": "MessagingSpace", "kwargs": {"groups": {"street": [0, 1, 2, 3]}}}]},
        "steps": [
            {"type": "run", "num_steps": ticks_before, "tick": 3600},
            {"type": "questionnaire", "questionnaire_id": "mood", "questions": [
                {"id": "happy", "prompt": "How happy are you (1-5)?", "response_type": "integer", "min": 1, "max": 5},
                {"id": "plan", "prompt": "Stay home or go out?", "response_type": "choice", "choices": ["home", "out"]},
            ]},
            {"type": "run", "num_steps": ticks_after, "tick": 3600},
        ],
        "batch_size": 2,
        "max_workers": 1,
        "storage": {"workspaces": storage},
    }


def write_spec(path: Path, spec: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(spec), encoding="utf-8")
    return path


def start_driver(args: list[str], *, failpoints: str | None = None, cwd: Path, in_process: bool = False) -> subprocess.Popen[str]:
    """``polis <args>`` in its own session (so a failpoint's group kill reaches only it and its workers), on a
    LocalCluster of 2 workers, or with ``in_process`` the whole run in that one process."""
    env = {**os.environ, "POLIS_N_WORKERS": "2", "POLIS_DASHBOARD_ADDRESS": "127.0.0.1:0"}
    env.pop("POLIS_FAILPOINTS", None)
    env.pop("POLIS_SCHEDULER", None)
    if in_process:
        env["POLIS_SCHEDULER"] = "in-process"
    if failpoints:
        env["POLIS_FAILPOINTS"] = failpoints
    return subprocess.Popen(
        [sys.executable, "-m", "engine.cli", *args], cwd=cwd, env=env, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def group_is_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def final_state(run: Path | str) -> dict[str, Any]:
    """What a run ends with: replay rows (minus timings and run ids), workspaces, env state."""
    with ReplayReader(run) as reader:
        actions = reader.query(
            "SELECT agent_id, step, t, status, tools_called, summary, turns, env_calls, llm_calls, input_tokens, output_tokens "
            "FROM actions ORDER BY agent_id, step"
        ).to_pylist()
        answers = reader.query(
            "SELECT agent_id, question_id, value_json, parse_success FROM questionnaire_answers ORDER BY agent_id, question_id"
        ).to_pylist() if "questionnaire_answers" in reader.datasets() else []
        messaging = {
            name: reader.query(f"SELECT * EXCLUDE (run) FROM {name} ORDER BY ALL").to_pylist()
            for name in reader.datasets() if name.startswith("env_messaging")
        }
    store = run_store(run)
    workspaces = {}
    for spec in store.get_json(SOCIETY_FILE)["agent_specs"]:
        ws = agent_workspace(run, int(spec["id"]))  # packed or a folder: read the same way
        assert ws is not None, spec["id"]
        workspaces[ws.name] = {
            name: ws.read_text(name) if ws.is_file(name) else None
            for name in ("AGENT.json", "AGENT_MEMORY.md", "memory/episodes.jsonl", ".runtime/logs/thread_messages.jsonl",
                         ".runtime/logs/tool_calls.jsonl", "state/todo.json")
        }
    status = store.get_json(SOCIETY_STEP_FILE)
    snapshot = env_snapshot_prefix(status["env_snapshot"])
    # The template cache's hit counters are not env state: a tick re-run after a crash finds the code
    # its first attempt cached (the cache file outlives transactions) and counts a hit, not a miss.
    env = {key.removeprefix(snapshot): store.get(key).decode() for key in store.list_prefix(snapshot)
           if key.endswith(".json") and key.rpartition("/")[2] not in ("_codegen_cache.json", ENV_SNAPSHOT_DONE)}
    return {"actions": actions, "answers": answers, "messaging": messaging, "workspaces": workspaces, "env": env,
            "ticks": status["step_count"], "completed_steps": status["completed_steps"]}
