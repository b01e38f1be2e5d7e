"""In this process or on a LocalCluster: the same spec on the two shells, side by side.

The spec is ``tick_overhead.py``'s (one decision and one env call per agent-step, the in-process
simulated LLM). Each round runs it on the in-process shell (``scheduler="in-process"``: batches as
tasks on this event loop, the env router an object here) and on a fresh default LocalCluster (2
worker processes), alternately, and prints for each run
    [<shell>] start: <seconds from the call to the run's first phase report: cluster start, preflight>
    [<shell>] total: <seconds from the call to the summary>
    [<shell>] warm: <agent-steps per second over ticks 2..N>
and, over the rounds (best of each: a shared machine's noise only ever slows a run down),
    total ratio: <LocalCluster total / in-process total>
    warm ratio: <LocalCluster warm / in-process warm>

The in-process shell's point is a small experiment's first seconds (a notebook, a test), so the
first figure that matters is the total at a few dozen agents; at a thousand agents the cluster's
second process is what the warm ratio shows.

2026-12-06, 2 cores, tmpfs, with other tests running beside it: 40 agents, in-process 0.62 / 0.41 s
total, LocalCluster 4.06 / 3.60 s (total ratio 8.7); 1,000 agents, in-process 5.8 / 5.5 s (587 / 708
agent-steps/s warm), LocalCluster 14.3 / 10.6 s (460 / 548), total ratio 1.9, warm ratio 0.78. On this
spec, CPU-bound in the driver's coalesced env calls and the simulated LLM, the second worker process
does not pay for the pickling between processes on 2 cores.

Usage: python benchmarks/shells.py [--agents 1000] [--ticks 3] [--batch-size 256] [--repeat 2]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # rundirs, tick_overhead, when run as a script

from rundirs import positive, run_root  # noqa: E402
from tick_overhead import spec  # noqa: E402

from engine.cluster_options import IN_PROCESS  # noqa: E402
from engine.society.run.runner import run_experiment  # noqa: E402
from engine.society.shells import open_shell  # noqa: E402
from engine.spec import parse_spec  # noqa: E402

SHELLS = {"in-process": IN_PROCESS, "LocalCluster": None}


async def measure(args: argparse.Namespace, label: str, run_dir: Path) -> tuple[float, float]:
    """Run the spec once on ``label``'s shell; print its figures and return (total seconds, warm agent-steps/s)."""
    experiment = parse_spec(spec(args.agents, args.ticks, args.batch_size))
    marks: dict[int, float] = {}
    first_report: list[float] = []

    def on_progress(p) -> None:  # type: ignore[no-untyped-def]
        first_report or first_report.append(time.perf_counter())
        marks.setdefault(p.ticks_done, time.perf_counter())

    start = time.perf_counter()
    async with open_shell(SHELLS[label], dashboard_address="127.0.0.1:0") as shell:
        summary = await run_experiment(experiment, run_dir, shell, on_progress=on_progress)
    total = time.perf_counter() - start
    assert summary.status == "completed", summary.error
    warm = args.agents * (args.ticks - 1) / (marks[args.ticks] - marks[1])
    print(f"[{label}] start: {first_report[0] - start:.2f} s  total: {total:.2f} s  warm: {warm:.0f} agent-steps/s")
    return total, warm


async def main(args: argparse.Namespace) -> None:
    print(f"agents: {args.agents}  ticks: {args.ticks}  batch size: {args.batch_size}")
    results: dict[str, list[tuple[float, float]]] = {label: [] for label in SHELLS}
    with run_root() as root:
        for n in range(args.repeat):  # alternated, so neither shell always runs on a colder machine
            for label in SHELLS:
                results[label].append(await measure(args, label, root / f"{n}-{label}"))
    in_process, cluster = results["in-process"], results["LocalCluster"]
    print(f"total ratio: {min(t for t, _ in cluster) / min(t for t, _ in in_process):.2f}")
    print(f"warm ratio: {max(w for _, w in cluster) / max(w for _, w in in_process):.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=positive, default=1000)
    parser.add_argument("--ticks", type=int, default=3)
    parser.add_argument("--batch-size", type=positive, default=256)
    parser.add_argument("--repeat", type=positive, default=2, help="alternate the two shells this many times (best of each)")
    arguments = parser.parse_args()
    if arguments.ticks < 2:
        parser.error("--ticks must be at least 2 (the warm rate is over ticks 2..N)")
    asyncio.run(main(arguments))
