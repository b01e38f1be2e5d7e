"""Live counts' overhead: the same run with nobody listening (batches publish nothing) and with progress on.

With an ``on_progress`` callback the runner listens for the batches' live counts
(:mod:`engine.society.run.live_calls`): each LLM call a batch's agents make is counted on the worker, and each batch
logs its counts to the scheduler at most every 0.25 s, which forwards them to the driver. Without one, batches
publish nothing. The runs alternate ``--repeat`` times on one LocalCluster (default 2 workers) and the best warm
rate of each is compared (warm: ticks 2 and on, from the run's tick seconds). The spec is ``tick_overhead.py``'s,
one cheap simulated call per agent-step: the most calls per second, so the most counting per second. It also prints
the per-call cost of the counting itself (a publisher on this process's loop, its sends to nowhere) and how many
live messages reached the driver.

Measured here (2 cores shared with other jobs, load average 2-3.5; ``TMPDIR=/dev/shm``), 1,000 agents x 4 ticks,
batch 256, 2 workers, two sessions of alternated rounds:
    off: 743, 586, 666 / 678, 572, 648, 493 agent-steps/s
    on:  701, 646, 553 / 665, 581, 667, 707 agent-steps/s
    best on / best off: 0.94 / 1.04: no difference to see under the rounds' own spread (490-740)
    16 live messages per run (4,001 calls, 16 batches), 54 progress reports instead of 13
    counting: 0.24-0.26 us per call

Usage: python benchmarks/live_calls.py [--agents 1000] [--ticks 4] [--batch-size 256] [--repeat 3] [--workers 2]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # rundirs, when run as a script

from distributed import Client  # noqa: E402
from rundirs import positive, run_root  # noqa: E402

from engine.llm.meter import CallRecord  # noqa: E402
from engine.society.run.cluster import open_client  # noqa: E402
from engine.society.run.live_calls import LIVE_TOPIC, LivePublisher  # noqa: E402
from engine.society.run.runner import run_experiment  # noqa: E402
from engine.spec import parse_spec  # noqa: E402


def spec(agents: int, ticks: int, batch_size: int) -> dict:
    return {
        "name": "live-calls", "seed": 1, "llm": {"default": {"model": "sim/default:bench"}},
        "population": [{"count": agents, "profile_template": {"name": "Agent {i}"},
                        "config": {"max_react_turns": 1, "tools": ["finish"]}}],
        "environment": {"modules": [{"type": "MessagingSpace"}]},
        "steps": [{"type": "run", "num_steps": ticks, "tick": 600}],
        "batch_size": batch_size,
    }


async def per_call_cost(calls: int = 200_000) -> float:
    """Microseconds the counting adds to one LLM call (listener, tally, the throttle's clock), sends to nowhere."""
    publisher = LivePublisher(lambda message: None, run="r", scope="s", batch=0)
    record = CallRecord("agent:1", "default", None, None, "sim/default:bench", 100, 10, 1.0, "ok")
    started = time.perf_counter()
    for _ in range(calls):
        publisher.call(record)
    elapsed = time.perf_counter() - started
    publisher.close()
    return elapsed / calls * 1e6


async def one_run(client: Client, args: argparse.Namespace, root: Path, label: str, heard: list[int]) -> float:
    reports = [0]

    def count(progress) -> None:  # type: ignore[no-untyped-def]
        reports[0] += 1

    before = heard[0]
    summary = await run_experiment(parse_spec(spec(args.agents, args.ticks, args.batch_size)), root / label, client,
                                   on_progress=count if label.startswith("on") else None)
    assert summary.status == "completed", summary.error
    warm = args.agents * (args.ticks - 1) / sum(summary.tick_seconds[1:])
    print(f"[{label}] warm: {warm:.0f} agent-steps/s  ticks: {', '.join(f'{t:.2f}' for t in summary.tick_seconds)} s  "
          f"reports: {reports[0]}  live messages: {heard[0] - before}  LLM calls: {summary.llm_calls}")
    return warm


async def main(args: argparse.Namespace) -> None:
    print(f"counting: {await per_call_cost():.2f} us per call")
    off: list[float] = []
    on: list[float] = []
    with run_root() as root:
        async with open_client(n_workers=args.workers, dashboard_address="127.0.0.1:0") as client:
            assert client.scheduler is not None
            heard = [0]
            async with Client(client.scheduler.address, asynchronous=True) as counter:  # a second subscriber: it only counts
                counter.subscribe_topic(LIVE_TOPIC, lambda event: heard.__setitem__(0, heard[0] + 1))
                for n in range(args.repeat):  # alternated, so neither always runs on a colder machine
                    off.append(await one_run(client, args, root, f"off-{n}", heard))
                    on.append(await one_run(client, args, root, f"on-{n}", heard))
    print(f"off: {', '.join(f'{x:.0f}' for x in off)} agent-steps/s")
    print(f"on: {', '.join(f'{x:.0f}' for x in on)} agent-steps/s")
    print(f"best on / best off: {max(on) / max(off):.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=positive, default=1000)
    parser.add_argument("--ticks", type=positive, default=4)
    parser.add_argument("--batch-size", type=positive, default=256)
    parser.add_argument("--repeat", type=positive, default=3)
    parser.add_argument("--workers", type=positive, default=2)
    asyncio.run(main(parser.parse_args()))
