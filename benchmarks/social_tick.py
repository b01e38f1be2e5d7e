"""A social-media society at scale: ticks of --agents (default 100,000) agents on the social simulated LLM, with a
follow network (Barabási–Albert, m = 5, both ways: about 1,000,000 follows) and with none (everyone reads one
open feed), side by side on one LocalCluster.

Each agent, each tick, reads its feed and posts, reposts, likes, comments, follows or unfollows at the spec's
rates (``sim/social``). For each run it prints
    [<label>] ticks <s>, <s> ...; LLM calls <n>; <posts> posts, <reposts> reposts, <follows> follow changes;
    <files> files, <MB> MB (<bytes> per agent-tick); network build <s> s
and then the warm-tick ratio network / none. Bytes are allocated blocks (``du``).

2026-12-06, 2 cores, 100,000 agents x 2 ticks: no network 244 and 690 s, 6,510 files, 851 MB; BA m=5 288 and 410 s,
6,536 files, 802 MB (4,011 bytes per agent-tick); warm tick network / none 0.59. Measured before a post's likes were
searched by bisection (the open feed's popular posts were the slow part of its second tick).

Usage: python benchmarks/social_tick.py [--agents 100000] [--ticks 2] [--m 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # rundirs, when run as a script

from rundirs import disk_usage, filesystem, positive, run_root  # noqa: E402

from engine.society.run.cluster import open_client  # noqa: E402
from engine.society.run.runner import run_experiment  # noqa: E402
from engine.spec import parse_spec  # noqa: E402
from engine.storage.reader import ReplayReader  # noqa: E402

RATES = {"post": 0.1, "repost": 0.3, "like": 0.2, "comment": 0.05, "follow": 0.02, "unfollow": 0.01}


def spec(agents: int, ticks: int, m: int | None) -> dict[str, Any]:
    module: dict[str, Any] = {"type": "SocialMediaSpace"}
    data: dict[str, Any] = {
        "name": f"social-{agents}-{'ba' if m else 'open'}", "seed": 1,
        "llm": {"default": {"model": "sim/social", "extra": {"social": RATES}}},
        "population": [{"count": agents, "profile_template": {"name": "Agent {i}"}, "config": {"max_react_turns": 1}}],
        "environment": {"modules": [module]},
        "steps": [{"type": "run", "num_steps": ticks, "tick": 3600}],
    }
    if m:
        data["network"] = {"layers": {"follow": {"generate": {"model": "barabasi_albert", "m": m}, "directed": True, "mutual": True}}}
        module["network"] = {"follows": "follow"}
    return data


async def one_run(client: Any, agents: int, ticks: int, m: int | None, run_dir: Path) -> float:
    label = f"BA m={m}" if m else "no network"
    started = time.perf_counter()
    summary = await run_experiment(parse_spec(spec(agents, ticks, m)), run_dir, client)
    assert summary.status == "completed", summary.error
    files, size = disk_usage(run_dir)
    with ReplayReader(run_dir) as reader:
        kinds = {r["kind"]: r["n"] for r in reader.query("SELECT kind, count(*) AS n FROM social_actions GROUP BY kind").to_pylist()}
    warm = min(summary.tick_seconds[1:]) if len(summary.tick_seconds) > 1 else summary.tick_seconds[0]
    print(f"  [{label}] ticks {', '.join(f'{t:.1f}' for t in summary.tick_seconds)} s; LLM calls {summary.llm_calls:,}; "
          f"{kinds.get('post', 0):,} posts, {kinds.get('repost', 0):,} reposts, "
          f"{kinds.get('follow', 0) + kinds.get('unfollow', 0):,} follow changes; {files:,} files, {size / 1e6:,.1f} MB "
          f"({size / (agents * ticks):,.0f} bytes per agent-tick); whole run {time.perf_counter() - started:.1f} s", flush=True)
    return warm


async def main(args: argparse.Namespace) -> None:
    with run_root() as root:
        print(f"run directories on {filesystem(root)} ({root}); {os.cpu_count()} cores; {args.agents:,} agents x {args.ticks} ticks")
        async with open_client(dashboard_address="127.0.0.1:0") as client:
            none = await one_run(client, args.agents, args.ticks, None, root / "open")
            network = await one_run(client, args.agents, args.ticks, args.m, root / "network")
        print(f"warm tick with the network / without: {network:.1f} / {none:.1f} s = {network / none:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=positive, default=100_000)
    parser.add_argument("--ticks", type=positive, default=2)
    parser.add_argument("--m", type=positive, default=5)
    asyncio.run(main(parser.parse_args()))
