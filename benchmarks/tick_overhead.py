"""Tick overhead: 1,000 agents, simulated LLM in-process with zero latency, 3 ticks, default LocalCluster.

Each agent-step makes one LLM call (a structured decision) and one env call (its inbox, through
the env actor, coalesced per batch). Prints:
    first tick: <seconds from start, cluster start included, to the first tick done>
    warm: <agent-steps per second over ticks 2..3>

Usage: python benchmarks/tick_overhead.py [--agents 1000] [--ticks 3] [--batch-size 256]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from engine.society.cluster import open_client
from engine.society.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader


def spec(agents: int, ticks: int, batch_size: int) -> dict:
    return {
        "name": "tick-overhead",
        "seed": 1,
        "llm": {"default": {"model": "sim/bench"}},
        "population": [{
            "count": agents,
            "profile_template": {"name": "Agent {i}", "age": [20, 30, 40, 50]},
            # one decision per step, and only `finish` offered: 1 LLM call + 1 env call (observe)
            "config": {"max_react_turns": 1, "tools": ["finish"]},
        }],
        "environment": {"modules": [{"type": "MessagingSpace"}]},
        "steps": [{"type": "run", "num_steps": ticks, "tick": 600}],
        "batch_size": batch_size,
    }


async def main(args: argparse.Namespace) -> None:
    experiment = parse_spec(spec(args.agents, args.ticks, args.batch_size))
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        start = time.perf_counter()
        marks: dict[int, float] = {}

        def on_progress(p) -> None:  # type: ignore[no-untyped-def]
            marks.setdefault(p.ticks_done, time.perf_counter())

        async with open_client(dashboard_address="127.0.0.1:0") as client:
            cluster_up = time.perf_counter()
            summary = await run_experiment(experiment, run_dir, client, on_progress=on_progress)
        assert summary.status == "completed", summary.error
        with ReplayReader(run_dir) as reader:
            row = reader.query(
                "SELECT count(*) n, avg(llm_calls) llm, avg(env_calls) env, "
                "count(DISTINCT agent_id) agents FROM actions"
            ).to_pylist()[0]
        first = marks[1] - start
        warm_steps = args.agents * (args.ticks - 1)
        warm_s = marks[args.ticks] - marks[1]
        print(f"agents: {args.agents}  ticks: {args.ticks}  batch size: {args.batch_size}")
        print(f"cluster start: {cluster_up - start:.2f} s")
        print(f"tick seconds: {', '.join(f'{t:.2f}' for t in summary.tick_seconds)}")
        print(f"action rows: {row['n']}  LLM calls/agent-step: {row['llm']:.2f}  env calls/agent-step: {row['env']:.2f}")
        print(f"first tick: {first:.1f} s")
        print(f"warm: {warm_steps / warm_s:.0f} agent-steps/s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=256)
    asyncio.run(main(parser.parse_args()))
