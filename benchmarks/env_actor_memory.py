"""The env actor's memory over a long run: it must stay flat, not grow with the tool calls made.

Setup: ``--agents`` PersonAgents (default 200) with tools ``[ask_env]`` and ``max_react_turns: 2``,
a MessagingSpace behind the codegen router, the in-process simulated LLM (``sim/default``), through
``run_experiment`` (what ``polis run`` calls) on a LocalCluster of 2 worker processes. ``--ticks``
(default 50) ticks run.

Every 250 ms a probe on every worker reads the RSS of the worker process that hosts the env actor
and the tool-call records the actor holds. Prints one line per committed tick (``SOCIETY_STEP.json``
moves on): the RSS then and the most records held while the tick ran; then the RSS at ticks 1, 10, 25 and the last, the growth from tick 10 to the last
(ticks 1..10 warm up: imports, the template cache, the sandbox pool), and the rows of
``env_tool_calls``. The worker also runs batch tasks, so its RSS moves with them; the figure to read
is the trend. Before ``env_tool_calls`` the history grew by every call of the run.

Usage: python benchmarks/env_actor_memory.py [--agents 200] [--ticks 50] [--batch-size 100]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from engine.society.run.cluster import open_client
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader


def spec(args: argparse.Namespace) -> dict:
    return {
        "name": "env-actor-memory",
        "seed": 7,
        "llm": {"default": {"model": "sim/default"}},
        "population": [{
            "count": args.agents,
            "profile_template": {"name": "Agent {i}", "age": [20, 30, 40, 50]},
            "config": {"max_react_turns": 2, "tools": ["ask_env"]},
        }],
        "environment": {"modules": [{"type": "MessagingSpace"}], "router": "codegen"},
        "steps": [{"type": "run", "num_steps": args.ticks, "tick": 600}],
        "batch_size": args.batch_size,
    }


def probe(dask_worker: Any) -> dict[str, Any] | None:
    """On a worker: its RSS and the actor's held tool calls, if it hosts the env actor."""
    import psutil

    actors = [a for a in dask_worker.state.actors.values() if a is not None]  # None while one is being built
    if not actors:
        return None
    history = sum(len(a.router.get_tool_call_history()) for a in actors)
    return {"rss_mb": psutil.Process().memory_info().rss / 2**20, "held_calls": history}


def committed(run_dir: Path) -> int:
    try:
        return int(json.loads((run_dir / "SOCIETY_STEP.json").read_text())["step_count"])
    except (FileNotFoundError, ValueError, KeyError):
        return 0


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        async with open_client(n_workers=2, dashboard_address="127.0.0.1:0") as client:
            started = time.perf_counter()
            run = asyncio.create_task(run_experiment(parse_spec(spec(args)), run_dir, client))
            seen, held, figures = 0, 0, {}
            while not run.done():
                await asyncio.sleep(0.25)
                found = [p for p in (await client.run(probe)).values() if p is not None]
                if not found:
                    continue  # the actor is not up yet
                held = max(held, found[0]["held_calls"])
                tick = committed(run_dir)
                if tick > seen:
                    seen, figures[tick] = tick, {**found[0], "held_calls": held}
                    print(f"tick {tick:3d}: actor worker RSS {found[0]['rss_mb']:7.1f} MB; "
                          f"most tool calls held during the tick {held}", flush=True)
                    held = 0
            summary = await run
        assert summary.status == "completed", summary.error
        with ReplayReader(run_dir) as reader:
            rows = reader.count("env_tool_calls") if "env_tool_calls" in reader.datasets() else 0
    print(f"run: {time.perf_counter() - started:.1f} s, {summary.llm_calls} LLM calls; env_tool_calls rows: {rows}")
    last = max(figures)
    marks = [t for t in (1, 10, 25, last) if t in figures]
    print("RSS: " + ", ".join(f"tick {t} {figures[t]['rss_mb']:.1f} MB" for t in marks))
    most = max(f["held_calls"] for f in figures.values())
    print(f"most tool calls held at once: {most}")
    if 10 in figures and last > 10:
        growth = figures[last]["rss_mb"] - figures[10]["rss_mb"]
        calls = rows or most  # a tree without env_tool_calls holds every call of the run
        print(f"growth tick 10 -> {last}: {growth:+.1f} MB ({growth * 1024 / max(calls, 1):+.2f} KB per tool call of the run)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--ticks", type=int, default=50)
    parser.add_argument("--batch-size", type=int, default=100)
    asyncio.run(main(parser.parse_args()))
