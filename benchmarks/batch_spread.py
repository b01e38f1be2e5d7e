"""Batch spread: a run smaller than ``batch_size`` on every task slot of the cluster, against one batch.

Setup: the spec of ``llm_bound_tick.py`` (PersonAgents with tools ``[ask_env]`` and
``max_react_turns: 4``, MessagingSpace behind the codegen router) with ``--agents`` (default 200,
under the default ``batch_size`` of 256), over HTTP to ``polis sim-llm`` in its own process
(``--latency-ms``, default 200; capacity 2,000), on fresh LocalClusters of 2 workers. Two runs
alternate ``--repeat`` times (default 2):
  - one batch: ``max_workers: 1``, which caps the plan at one batch, as every tick of a run under
    ``batch_size`` was planned before ticks were spread over the task slots;
  - spread: the default plan, one batch per task slot while each keeps 16 agents.
Prints each run's warm ticks (2..N) and last
    one batch: <median warm tick> s; spread: <median warm tick> s
    spread ratio: <spread / one batch> (below 1: the spread run is faster)

Measured here on 2026-12-04 (2 cores, 2 workers x 2 threads, 200 ms latency, 4 ticks):
  - N=200, --repeat 2: one batch 1.35 s, spread 1.22 s, spread ratio 0.90; --repeat 3: 1.31 s vs
    1.21 s, 0.92. The one-batch run's tick 2 took 1.74-1.84 s, the spread run's 1.19-1.26 s.
  - N=64: one batch 1.16 s, spread 0.95 s, spread ratio 0.82 (the chain of 4 calls is 0.8 s).

Usage: python benchmarks/batch_spread.py [--agents 200] [--ticks 4] [--latency-ms 200] [--repeat 2] [--threads-per-worker 2]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # rundirs and llm_bound_tick, when run as a script

from llm_bound_tick import spec  # noqa: E402
from rundirs import positive, run_root  # noqa: E402

from engine.llm.sim.process import sim_llm_process  # noqa: E402
from engine.settings import THREADS_PER_WORKER  # noqa: E402
from engine.society.run.cluster import open_client  # noqa: E402
from engine.society.run.runner import run_experiment  # noqa: E402
from engine.spec import parse_spec  # noqa: E402

PLANS = {"one batch": {"max_workers": 1}, "spread": {}}


async def warm_ticks(args: argparse.Namespace, base_url: str, plan: str, run_dir: Path) -> list[float]:
    experiment = parse_spec({**spec(args, base_url), **PLANS[plan]})
    async with open_client(dashboard_address="127.0.0.1:0", threads_per_worker=args.threads_per_worker) as client:
        summary = await run_experiment(experiment, run_dir, client)
    assert summary.status == "completed", summary.error
    shards = len(list((run_dir / "replay" / "actions").glob("step_000001-*.parquet")))
    warm = list(summary.tick_seconds[1:])
    print(f"[{plan}] batches a tick: {shards}; warm ticks: {', '.join(f'{t:.2f}' for t in warm)} s")
    return warm


async def main(args: argparse.Namespace) -> None:
    ticks: dict[str, list[float]] = {plan: [] for plan in PLANS}
    with run_root() as root, sim_llm_process(name="bench", seed=1, latency_ms=args.latency_ms, capacity=2000) as server:
        for n in range(args.repeat):  # alternated, so neither plan always runs on a colder machine
            for plan in PLANS:
                ticks[plan] += await warm_ticks(args, server.base_url, plan, root / f"{plan.replace(' ', '-')}-{n}")
    one, spread = (statistics.median(ticks[plan]) for plan in PLANS)
    print(f"one batch: {one:.2f} s; spread: {spread:.2f} s")
    print(f"spread ratio: {spread / one:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=200)
    parser.add_argument("--ticks", type=int, default=4)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--repeat", type=positive, default=2, help="alternate the two runs this many times")
    parser.add_argument("--threads-per-worker", type=positive, default=THREADS_PER_WORKER, help="task slots per worker")
    args = parser.parse_args()
    args.batch_size = 256  # the default: the run is smaller than one batch
    asyncio.run(main(args))
