"""A spec's context budget, checked by the run's own token telemetry: past it an agent's thread memory compacts, so
prompts stop growing; and a model's context window refuses an oversized call before it is sent."""

from __future__ import annotations

import asyncio
from pathlib import Path

from engine.society.run.runner import run_experiment
from engine.society.shells import InProcessShell
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader

TICKS = 7


def run(tmp_path: Path, name: str, **fields: object) -> tuple[object, Path]:
    spec = parse_spec({"name": name, "seed": 2, "population": [{"count": 8}], "llm": {"default": {"model": "sim/social"}},
                       "environment": {"modules": [{"type": "SocialMediaSpace"}]},
                       "steps": [{"type": "run", "num_steps": TICKS, "tick": 3600}], **fields})
    folder = tmp_path / name
    return asyncio.run(run_experiment(spec, folder, InProcessShell())), folder


def p95s(folder: Path) -> list[int]:
    with ReplayReader(folder) as reader:
        rows = reader.query("SELECT step, prompt_p95 FROM token_telemetry WHERE tier = 'llm' ORDER BY step").to_pylist()
    return [r["prompt_p95"] for r in rows]


def test_prompts_stop_growing_at_the_context_budget(tmp_path: Path) -> None:
    free, free_run = run(tmp_path, "free")
    bounded, bounded_run = run(tmp_path, "bounded", context_budget=1200)
    assert free.status == bounded.status == "completed"
    grown, kept = p95s(free_run), p95s(bounded_run)
    assert len(grown) == len(kept) == TICKS
    assert grown[-1] > 1.5 * 1200  # without a budget the thread memory grows tick after tick
    assert max(kept) <= 1.1 * 1200 and kept[-1] <= 1.1 * kept[3]  # with one, the telemetry shows prompts held near it
    with ReplayReader(bounded_run) as reader:
        compactions = reader.query("SELECT count(*) AS n FROM llm_calls WHERE prompt_name = 'memory.compact'").to_pylist()
    assert compactions[0]["n"] > 0


def test_a_call_over_the_context_window_is_refused_unsent_and_recorded(tmp_path: Path) -> None:
    summary, folder = run(tmp_path, "window", llm={"default": {"model": "sim/social", "context_window": 300}})
    assert summary.status == "failed" and summary.errors == 8 * TICKS
    with ReplayReader(folder) as reader:
        steps = reader.query("SELECT DISTINCT status, error FROM actions").to_pylist()
        calls = reader.query("SELECT status, count(*) AS n, max(input_tokens) AS sent FROM llm_calls GROUP BY ALL").to_pylist()
    assert {s["status"] for s in steps} == {"llm_error"}
    assert all(s["error"].startswith("not sent: the prompt is about") and "over the model's context window of 300" in s["error"]
               for s in steps)
    assert [(c["status"], c["sent"]) for c in calls] == [("error", 0)] and calls[0]["n"] >= 8 * TICKS
