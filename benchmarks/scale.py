"""Agent state at scale: files, bytes, RSS and agent-steps/s of packed runs, against a folder per agent.

Runs the tick-overhead spec (one decision per agent-step on the in-process simulated LLM, a
MessagingSpace, 3 ticks) on one LocalCluster, in this order:
1. 1,000 agents with ``storage.workspaces: dir`` and with ``packed``, side by side (--repeat times,
   alternated): warm tick seconds (the best of ticks 2..3), their ratio packed/dir, and files and
   bytes per agent-tick of each whole run directory;
2. --agents (default 100,000) agents, packed: agents created per second (``create_packed_agents``
   timed in this process, as the driver's ``init`` runs it), files and bytes per agent-tick, warm
   agent-steps/s against the 1,000-agent packed run's, and the peak RSS of the driver and of each worker.

Bytes are allocated blocks (``du``), so a folder run's many small files count as the disk holds them.

Usage: python benchmarks/scale.py [--agents 100000] [--small 1000] [--ticks 3] [--repeat 1] [--skip-large]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))  # rundirs, when run as a script

from rundirs import disk_usage, filesystem, positive, run_root  # noqa: E402

from engine.society.run.cluster import open_client  # noqa: E402
from engine.society.run.runner import run_experiment  # noqa: E402
from engine.society.workspaces.manifest import create_packed_agents  # noqa: E402
from engine.spec import parse_spec  # noqa: E402
from engine.storage.store import LocalStore  # noqa: E402


def spec(agents: int, ticks: int, storage: str) -> dict[str, Any]:
    return {
        "name": f"scale-{storage}-{agents}",
        "seed": 1,
        "llm": {"default": {"model": "sim/default:bench"}},
        "population": [{"count": agents, "profile_template": {"name": "Agent {i}", "age": [20, 30, 40, 50]},
                        "config": {"max_react_turns": 1, "tools": ["finish"]}}],
        "environment": {"modules": [{"type": "MessagingSpace"}]},
        "steps": [{"type": "run", "num_steps": ticks, "tick": 600}],
        "storage": {"workspaces": storage},
    }


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def worker_rss(client: Any) -> dict[str, float]:
    """Peak RSS of each worker process, in MB."""
    return dict(await client.run(_peak_rss_mb))


async def one_run(client: Any, agents: int, ticks: int, storage: str, run_dir: Path) -> dict[str, float]:
    started = time.perf_counter()
    summary = await run_experiment(parse_spec(spec(agents, ticks, storage)), run_dir, client)
    assert summary.status == "completed", summary.error
    files, size = disk_usage(run_dir)
    warm = min(summary.tick_seconds[1:]) if len(summary.tick_seconds) > 1 else summary.tick_seconds[0]
    figures = {"warm_s": warm, "steps_per_s": agents / warm, "files_per_agent_tick": files / (agents * ticks),
               "bytes_per_agent_tick": size / (agents * ticks), "seconds": time.perf_counter() - started,
               "first_tick_s": summary.tick_seconds[0], "files": files, "bytes": size}
    print(f"  [{storage} {agents:,}] ticks {', '.join(f'{t:.2f}' for t in summary.tick_seconds)} s; warm {figures['steps_per_s']:,.0f} "
          f"agent-steps/s; {files:,} files ({figures['files_per_agent_tick']:.4f} per agent-tick), "
          f"{size / 1e6:,.1f} MB ({figures['bytes_per_agent_tick']:,.0f} bytes per agent-tick); whole run {figures['seconds']:.1f} s",
          flush=True)
    return figures


async def main(args: argparse.Namespace) -> None:
    with run_root() as root:
        print(f"run directories on {filesystem(root)} ({root}); {os.cpu_count()} cores")
        async with open_client(dashboard_address="127.0.0.1:0") as client:
            small: dict[str, list[dict[str, float]]] = {"dir": [], "packed": []}
            for n in range(args.repeat):
                for storage in ("dir", "packed") if n % 2 == 0 else ("packed", "dir"):
                    small[storage].append(await one_run(client, args.small, args.ticks, storage, root / f"{storage}-{n}"))
            best = {s: min(r["warm_s"] for r in runs) for s, runs in small.items()}
            print(f"{args.small:,} agents: warm tick packed {best['packed']:.2f} s, dir {best['dir']:.2f} s: "
                  f"ratio packed/dir {best['packed'] / best['dir']:.2f} (goal <= 0.8)")
            for storage, runs in small.items():
                print(f"  {storage}: {runs[0]['files_per_agent_tick']:.4f} files and {runs[0]['bytes_per_agent_tick']:,.0f} bytes per agent-tick")
            if args.skip_large:
                return
            specs = [{"id": i, "type": "PersonAgent", "profile": {"name": f"Agent {i}", "age": 20 + i % 4 * 10},
                      "config": {"max_react_turns": 1, "tools": ["finish"]}} for i in range(args.agents)]
            started = time.perf_counter()
            create_packed_agents(LocalStore(root / "create"), specs, txn=0, batch_size=256)
            created = args.agents / (time.perf_counter() - started)
            print(f"agents created: {created:,.0f}/s ({args.agents:,} into packs of 256, in this process; goal >= 20,000/s)")
            large = await one_run(client, args.agents, args.ticks, "packed", root / "large")
            print(f"{args.agents:,} agents x {args.ticks} ticks, packed: {large['files_per_agent_tick']:.4f} files per agent-tick "
                  f"(goal <= 0.1), {large['bytes_per_agent_tick']:,.0f} bytes per agent-tick (goal <= 10,000)")
            ratio = large["steps_per_s"] / max(r["steps_per_s"] for r in small["packed"])
            print(f"warm agent-steps/s at {args.agents:,} against {args.small:,}: {large['steps_per_s']:,.0f} / "
                  f"{max(r['steps_per_s'] for r in small['packed']):,.0f} = {ratio:.2f} (goal >= 0.9)")
            rss = await worker_rss(client)
            print(f"peak RSS: driver {_peak_rss_mb():,.0f} MB; workers "
                  + ", ".join(f"{mb:,.0f} MB" for mb in rss.values()) + " (goal <= 2,048 MB each)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=positive, default=100_000)
    parser.add_argument("--small", type=positive, default=1000)
    parser.add_argument("--ticks", type=positive, default=3)
    parser.add_argument("--repeat", type=positive, default=1, help="side-by-side rounds of the small runs (alternated)")
    parser.add_argument("--skip-large", action="store_true", help="only the side-by-side small runs")
    asyncio.run(main(parser.parse_args()))
