"""Fidelity tiers at scale, on the social simulated LLM and one LocalCluster (the path `polis run` takes).

Three scenarios, each a run of its own (``--scenario`` picks them; default all):

- ``archetype``: --agents (default 1,000,000) agents, 1% LLM agents and 99% archetype members in groups of
  --group (default 1,000) by a two-field key;
- ``rule``: the same number of agents, all rule members (half bounded-confidence, half social_poster): the engine's
  own per-agent cost, with no LLM;
- ``llm``: --llm-agents (default 2,000) LLM agents for --llm-ticks (default 50) ticks under a context budget of
  --budget tokens (default 1,500): the prompts' p95 at the last tick against tick 5 (goal: at most 1.1x).

For each it prints LLM calls per tick (from ``token_telemetry``), wall seconds per tick, the peak RSS of the driver
and of each worker process, and the run's files and bytes (``du``).

2026-12-07, 2 cores, 24 GiB, SocialMediaSpace, 2 ticks each (members reach the env actor by serve_direct):
- 1,000,000 agents, 1% LLM + 99% archetype (990 groups): 11,001 LLM calls a tick; ticks 369 s and 345 s; peak RSS
  driver 2.20 GB, the env actor's worker 6.43 GB, the other worker 0.59 GB; 2,565 files, 611 MB (305 bytes, 0.0013
  files per agent-tick), 395 MB of it the env's two snapshots.
- 1,000,000 rule agents: ticks 334 s and 374 s; peak RSS driver 1.66 GB, the env actor's worker 4.91 GB; 1,248 files,
  301 MB (151 bytes, 0.0006 files per agent-tick).
- 4,000 LLM agents x 50 ticks, context budget 1,500: prompt p95 1,367 tokens at tick 5 and 1,427 at tick 50 (1.04x);
  all 200,000 steps finished; ~20 s a tick alone (~8,000 LLM calls a tick: the agents', their compactions', the
  router's); 10,031 bytes and 0.036 files per agent-tick, half of it the agents' workspace packs. At that rate
  100,000 agents x 50 ticks would take about 7 hours on these 2 cores.
2026-12-06, before serve_direct and the per-agent update queue: the archetype million took 598 s and 1,181 s a tick
(the second beside a test suite), 9.04 GB in the env actor's worker and 753 bytes per agent-tick; the rule million's
second tick had not ended after 40 minutes.

Usage: python benchmarks/tiers.py [--scenario archetype|rule|llm] [--agents 1000000] [--ticks 2] [--group 1000]
       [--llm-agents 2000] [--llm-ticks 50] [--budget 1500]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))  # rundirs, when run as a script

from rundirs import disk_usage, filesystem, largest_parts, positive, run_root  # noqa: E402

from engine.society.run.cluster import open_client  # noqa: E402
from engine.society.run.runner import run_experiment  # noqa: E402
from engine.spec import parse_spec  # noqa: E402
from engine.storage.reader import ReplayReader  # noqa: E402

SOCIAL = {"type": "SocialMediaSpace", "kwargs": {"feed_limit": 20}}
KEY = {"region": ["north", "south", "east", "west", "centre"], "age_band": ["18-29", "30-44", "45-64", "65+"],
       "party": ["left", "centre", "right"]}


def archetype_spec(agents: int, ticks: int, group: int) -> dict[str, Any]:
    llm = max(1, agents // 100)
    return {
        "name": f"tiers-archetype-{agents}", "seed": 1, "llm": {"default": {"model": "sim/social"}}, "batch_size": 5000,
        "population": [
            {"count": llm, "profile_template": KEY, "config": {"max_react_turns": 1}},
            {"count": agents - llm, "profile_template": KEY, "tier": "archetype", "archetype": {
                "key": ["region", "party"], "group_size": group, "observations": "common", "options": [
                    {"name": "post", "tool": "create_post", "arguments": {"text": "{text}"}}, {"name": "idle"}]}},
        ],
        "environment": {"modules": [SOCIAL]}, "steps": [{"type": "run", "num_steps": ticks, "tick": 3600}],
    }


def rule_spec(agents: int, ticks: int) -> dict[str, Any]:
    half = agents // 2
    return {
        "name": f"tiers-rule-{agents}", "seed": 1, "batch_size": 5000,
        "population": [
            {"count": half, "tier": "rule", "rule": {"policy": "bounded_confidence", "params": {"post_probability": 0.1}}},
            {"count": agents - half, "tier": "rule", "rule": {"policy": "social_poster"}},
        ],
        "environment": {"modules": [SOCIAL]}, "steps": [{"type": "run", "num_steps": ticks, "tick": 3600}],
    }


def llm_spec(agents: int, ticks: int, budget: int) -> dict[str, Any]:
    return {
        "name": f"tiers-llm-{agents}", "seed": 1, "llm": {"default": {"model": "sim/social"}}, "context_budget": budget,
        "population": [{"count": agents, "profile_template": {"name": "Agent {i}"}, "config": {"max_react_turns": 1}}],
        "environment": {"modules": [SOCIAL]}, "steps": [{"type": "run", "num_steps": ticks, "tick": 3600}],
    }


async def worker_peaks(client: Any) -> list[float]:
    """Each worker process's peak RSS so far, in GB (the ru_maxrss of its process)."""
    found = await client.run(lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    return [kb / 1e6 for kb in found.values()]


async def one_run(client: Any, label: str, data: dict[str, Any], run_dir: Path) -> list[dict[str, Any]]:
    started = time.perf_counter()
    summary = await run_experiment(parse_spec(data), run_dir, client)
    files, size = disk_usage(run_dir)
    with ReplayReader(run_dir) as reader:
        telemetry = reader.query("SELECT step, tier, members, calls, prompt_p50, prompt_p95, prompt_max, prefix_share "
                                 "FROM token_telemetry ORDER BY step, tier").to_pylist()
    agent_steps = sum(r["members"] for r in telemetry if r["tier"] == "total")
    driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
    workers = await worker_peaks(client)
    calls = {r["step"]: r["calls"] for r in telemetry if r["tier"] == "total"}
    print(f"[{label}] {summary.status} {summary.error or ''} statuses {summary.statuses}\n"
          f"  ticks {', '.join(f'{t:.1f}' for t in summary.tick_seconds)} s; LLM calls per tick {list(calls.values())}; "
          f"agent-steps {agent_steps:,}\n  peak RSS: driver {driver:.2f} GB, workers {', '.join(f'{w:.2f}' for w in workers)} GB "
          f"(the env actor lives in one of them)\n  {files:,} files, {size / 1e6:,.1f} MB "
          f"({size / max(1, agent_steps):,.0f} bytes, {files / max(1, agent_steps):.4f} files per agent-tick); whole run "
          f"{time.perf_counter() - started:.1f} s\n  largest: "
          + ", ".join(f"{name} {size / 1e6:,.1f} MB" for name, size in largest_parts(run_dir)), flush=True)
    return telemetry


async def main(args: argparse.Namespace) -> None:
    with run_root() as root:
        print(f"run directories on {filesystem(root)} ({root}); {os.cpu_count()} cores, "
              f"{psutil.virtual_memory().total / 2**30:.0f} GiB")
        async with open_client(dashboard_address="127.0.0.1:0") as client:
            if args.scenario in (None, "archetype"):
                await one_run(client, f"{args.agents:,} agents: 1% LLM, 99% archetype in groups of {args.group:,}",
                              archetype_spec(args.agents, args.ticks, args.group), root / "archetype")
            if args.scenario in (None, "rule"):
                await one_run(client, f"{args.agents:,} rule agents", rule_spec(args.agents, args.ticks), root / "rule")
            if args.scenario in (None, "llm"):
                telemetry = await one_run(client, f"{args.llm_agents:,} LLM agents x {args.llm_ticks} ticks, budget {args.budget}",
                                          llm_spec(args.llm_agents, args.llm_ticks, args.budget), root / "llm")
                p95 = {r["step"]: r["prompt_p95"] for r in telemetry if r["tier"] == "llm"}
                last = max(p95)
                if 5 in p95:
                    print(f"  prompt p95: tick 5 {p95[5]}, tick {last} {p95[last]} tokens: {p95[last] / p95[5]:.2f}x (goal <= 1.1x); "
                          f"by tick: {[p95[s] for s in sorted(p95)]}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", choices=("archetype", "rule", "llm"), default=None)
    parser.add_argument("--agents", type=positive, default=1_000_000)
    parser.add_argument("--ticks", type=positive, default=2)
    parser.add_argument("--group", type=positive, default=1000)
    parser.add_argument("--llm-agents", type=positive, default=2000)
    parser.add_argument("--llm-ticks", type=positive, default=50)
    parser.add_argument("--budget", type=positive, default=1500)
    asyncio.run(main(parser.parse_args()))
