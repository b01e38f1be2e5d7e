"""Tick overhead: 1,000 agents, one decision per step, 3 ticks, default LocalCluster.

Each agent-step makes one LLM call (a structured decision) and one env call (its inbox, through
the env actor, coalesced per batch). Prints:
    first tick: <seconds from start, cluster start included, to the first tick done>
    warm: <agent-steps per second over ticks 2..3>

``--http`` runs the same spec in this one process, each run on a fresh LocalCluster, by turns on
the in-process simulated LLM (``sim/bench``) and as users run a real endpoint, over HTTP to
``polis sim-llm --latency-ms 0`` in its own process (``openai/bench`` + ``base_url``). It also prints
    sim-llm CPU: <seconds the server process used, and per call> (each http run)
    in-process: <best warm agent-steps/s>
    http: <best warm agent-steps/s>
    http ratio: <http / in-process> (each: <in-process runs> / <http runs>)
The goal is an http ratio of at least 0.6. Before the lean transport (litellm over httpx, ~5 ms of
client CPU per call) the ratio was about 0.25 here (104-127 against 360-515 agent-steps/s); with
it, 0.67-0.69. On 2026-12-02, with the garbage-collector threshold of ``engine.llm.gc_policy`` and
``polis sim-llm`` as a bare ASGI app: in-process 232, http 245 (ratio 1.06); a second run 211 and
211 (1.00); sim-llm 0.91-0.94 ms of CPU per call.

The two runs alternate ``--repeat`` times (default 2) and the best of each is compared, and every
run directory is removed only at the end (``rundirs.py``). On 2026-12-02, on a VM whose disk
made each new file slow for about half a minute after a mass deletion, the in-process run's
removal had been charged to the http run that followed it: four runs of the old order gave
http ratio 0.49, 0.62, 0.53, 0.70 (in-process 885, 402, 935, 503; http 431, 250, 494, 279).
One alternated run: in-process 322 then 760, http 385 then 700 (the first round ran on a
cold disk); ratio 0.92. With the run directories on tmpfs (``TMPDIR=/dev/shm``), two runs of
the old order: in-process 1,249 / 1,016, http 927 / 901, ratio 0.74 / 0.89.

On a slower VM the next day (CI's pytest took 19.6 min there, ~9 on CI), tmpfs, 2 task slots per
worker: in-process 352, 371, http 287, 292, ratio 0.79. In-process runs alternated by slots per
worker (``--threads-per-worker``): 1 slot 350, 330; 2 slots 340, 383 agent-steps/s, so the second
slot costs this CPU-bound spec nothing.

Usage: python benchmarks/tick_overhead.py [--agents 1000] [--ticks 3] [--batch-size 256] [--http [--repeat 2]] [--threads-per-worker 2]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # rundirs, when run as a script

from rundirs import positive, run_root  # noqa: E402

from engine.llm.sim.process import sim_llm_process  # noqa: E402
from engine.settings import THREADS_PER_WORKER  # noqa: E402
from engine.society.run.cluster import open_client  # noqa: E402
from engine.society.run.runner import run_experiment  # noqa: E402
from engine.spec import parse_spec  # noqa: E402
from engine.storage.reader import ReplayReader  # noqa: E402


def spec(agents: int, ticks: int, batch_size: int, llm: dict | None = None) -> dict:
    return {
        "name": "tick-overhead",
        "seed": 1,
        "llm": {"default": llm or {"model": "sim/default:bench"}},
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


async def measure(args: argparse.Namespace, llm: dict | None, label: str, root: Path) -> float:
    """Run the spec once on a fresh LocalCluster; print its figures and return warm agent-steps/s."""
    experiment = parse_spec(spec(args.agents, args.ticks, args.batch_size, llm))
    run_dir = root / label
    start = time.perf_counter()
    marks: dict[int, float] = {}

    def on_progress(p) -> None:  # type: ignore[no-untyped-def]
        marks.setdefault(p.ticks_done, time.perf_counter())

    async with open_client(dashboard_address="127.0.0.1:0", threads_per_worker=args.threads_per_worker) as client:
        cluster_up = time.perf_counter()
        summary = await run_experiment(experiment, run_dir, client, on_progress=on_progress)
    assert summary.status == "completed", summary.error
    with ReplayReader(run_dir) as reader:
        row = reader.query(
            "SELECT count(*) n, avg(llm_calls) llm, avg(env_calls) env, "
            "count(DISTINCT agent_id) agents FROM actions"
        ).to_pylist()[0]
    first = marks[1] - start
    warm = args.agents * (args.ticks - 1) / (marks[args.ticks] - marks[1])
    print(f"[{label}] agents: {args.agents}  ticks: {args.ticks}  batch size: {args.batch_size}")
    print(f"[{label}] cluster start: {cluster_up - start:.2f} s")
    print(f"[{label}] tick seconds: {', '.join(f'{t:.2f}' for t in summary.tick_seconds)}")
    print(f"[{label}] action rows: {row['n']}  LLM calls/agent-step: {row['llm']:.2f}  env calls/agent-step: {row['env']:.2f}")
    print(f"first tick: {first:.1f} s" if label == "in-process" else f"[{label}] first tick: {first:.1f} s")
    print(f"warm: {warm:.0f} agent-steps/s" if label == "in-process" else f"[{label}] warm: {warm:.0f} agent-steps/s")
    return warm


async def main(args: argparse.Namespace) -> None:
    with run_root() as root:
        if not args.http:
            await measure(args, None, "in-process", root)
            return
        in_process: list[float] = []
        http: list[float] = []
        with sim_llm_process(name="bench", seed=1, latency_ms=0) as server:
            for n in range(args.repeat):  # alternated, so neither path always runs on a colder machine
                in_process.append(await measure(args, None, "in-process", root / str(n)))
                cpu_before, calls_before = server.cpu_seconds(), sum(server.stats()["calls"].values())
                http.append(await measure(args, {"model": "openai/bench", "base_url": server.base_url}, "http", root / str(n)))
                calls = sum(server.stats()["calls"].values()) - calls_before
                cpu = server.cpu_seconds() - cpu_before
                print(f"sim-llm CPU: {cpu:.1f} s for {calls} calls ({cpu / max(calls, 1) * 1000:.2f} ms per call)")
    each = f" (each: {', '.join(f'{a:.0f}' for a in in_process)} / {', '.join(f'{h:.0f}' for h in http)})" if args.repeat > 1 else ""
    # the best of each: a shared VM's noise (and a cold disk) only ever slows a run down
    print(f"in-process: {max(in_process):.0f} agent-steps/s")
    print(f"http: {max(http):.0f} agent-steps/s")
    print(f"http ratio: {max(http) / max(in_process):.2f}{each}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=256)
    parser.add_argument("--http", action="store_true", help="also run over HTTP to polis sim-llm in its own process")
    parser.add_argument("--repeat", type=positive, default=2, help="with --http: alternate the two runs this many times (best of each)")
    parser.add_argument("--threads-per-worker", type=positive, default=THREADS_PER_WORKER, help="task slots per worker")
    asyncio.run(main(parser.parse_args()))
