"""What forks cost: the disk the kept ticks take, and the time to fork a 1,000-agent run at its middle tick.

Runs an N-agent, T-tick seeded spec (sim/default LLM, PersonAgent, MessagingSpace, codegen router,
max_react_turns 1) twice on a real LocalCluster, with ``snapshots: {keep: null}`` (every tick kept)
and ``snapshots: {keep: 0}`` (only the last), then prints:
    kept history: bytes per agent per tick of the agents' step journals (``.runtime/txn/``), the env
        snapshots (``env/_snapshots``) and the ``history/`` records, for both runs. Disk bytes are
        ``st_blocks * 512`` summed over unique (st_dev, st_ino); a journal's hard link to a file the
        workspace still holds costs nothing, so only inodes no live file shares are counted.
    live workspace bytes per agent (outside ``.runtime/txn``), for scale, and du-style totals of both runs.
    fork: ``plan_fork`` + ``materialize_fork`` of the keep-null run at tick T // 2 (files linked, bytes
        copied), then ``fork_experiment`` end to end into another directory: seconds (plan and
        materialize included) to its first committed tick and to its end, and how many of its own
        LLM calls the response cache answered (its ticks replay the parent's).

Measured on 2 cores shared with other jobs (default: 1,000 agents, 4 ticks, fork at 2), at commit d50e367:
    2 cores, load average 8.4 at start
    keep=None: 30.6 s run, kept history 11,308 B/agent/tick (journals 11,275, env snapshots 29, history 4); du 108.8 MB
    keep=0: 41.6 s run, kept history 19 B/agent/tick (journals 0, env snapshots 15, history 4); du 63.6 MB
    live workspace: 39,178 B/agent; every tick kept costs 11,289 B/agent/tick more than keeping the last
    fork at tick 2 of 1000 agents: 4.23 s (plan 0.15 s + materialize 4.08 s), 4,122 files linked, 11,858,201 bytes copied
    fork_experiment: 9.00 s to first committed tick, 15.01 s to the end (2 ticks); its own LLM calls: 2,000 of 2,000
        answered by the response cache
    load average 4.5 at the end
The byte figures do not change from run to run; the seconds follow the load. An earlier run of the
same spec at load 9-12 (before d50e367 sped up the workspace copies): 105.5 s and 133.0 s for the
two runs, plan 0.59 s + materialize 15.07 s, 37.02 s to the fork's first committed tick.

Usage: python benchmarks/fork.py [--agents 1000] [--ticks 4] [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.run_progress import RunProgress
from engine.society.fork.materialize import materialize_fork, plan_fork
from engine.society.fork.run import fork_experiment
from engine.society.run.cluster import open_client
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader

TXN = os.path.join(".runtime", "txn")


def spec(agents: int, ticks: int, keep: int | None) -> dict[str, Any]:
    return {
        "name": f"fork-bench-keep-{keep}",
        "seed": 7,
        "start_time": "2026-03-02T08:00:00",
        "llm": {"default": {"model": "sim/default"}},
        "population": [{
            "count": agents,
            "profile_template": {"name": "Resident {i}", "occupation": ["teacher", "nurse", "baker"]},
            "config": {"max_react_turns": 1},
        }],
        "environment": {"router": "codegen", "modules": [
            {"type": "MessagingSpace", "kwargs": {"groups": {"street": list(range(min(agents, 20)))}}},
        ]},
        "steps": [{"type": "run", "num_steps": ticks, "tick": 3600}],
        "batch_size": 100,
        "snapshots": {"keep": keep},
    }


def walk(root: Path, *, skip: str | None = None) -> Iterator[os.stat_result]:
    """lstat of every file and symlink under ``root`` (``skip``: a relative folder left out)."""
    for directory, folders, files in os.walk(root):
        if skip is not None:
            folders[:] = [f for f in folders if os.path.relpath(os.path.join(directory, f), root) != skip]
        for name in [*files, *(f for f in folders if os.path.islink(os.path.join(directory, f)))]:
            yield os.lstat(os.path.join(directory, name))


def disk(stats: dict[tuple[int, int], os.stat_result]) -> int:
    return sum(s.st_blocks * 512 for s in stats.values())


def inodes(stats: Iterator[os.stat_result]) -> dict[tuple[int, int], os.stat_result]:
    return {(s.st_dev, s.st_ino): s for s in stats}


@dataclass(frozen=True)
class Footprint:
    """What one run directory holds on disk (bytes of unique inodes, st_blocks * 512)."""

    journals: int  #: inodes under agents' ``.runtime/txn`` that no live workspace file shares
    snapshots: int  #: inodes under ``env/_snapshots`` that no live ``env/`` file shares
    history: int  #: ``history/`` records
    live: int  #: agent workspaces outside ``.runtime/txn``
    total: int  #: the whole run directory, each inode once (du)

    @property
    def kept(self) -> int:
        return self.journals + self.snapshots + self.history


def footprint(run: Path) -> Footprint:
    live: dict[tuple[int, int], os.stat_result] = {}
    journal: dict[tuple[int, int], os.stat_result] = {}
    for ws in (run / "agents").iterdir():
        live.update(inodes(walk(ws, skip=TXN)))
        journal.update(inodes(walk(ws / TXN)))
    env_live = inodes(walk(run / "env", skip="_snapshots"))
    snapshots = inodes(walk(run / "env" / "_snapshots"))
    return Footprint(
        journals=disk({k: s for k, s in journal.items() if k not in live}),
        snapshots=disk({k: s for k, s in snapshots.items() if k not in env_live}),
        history=disk(inodes(walk(run / "history"))),
        live=disk(live),
        total=disk(inodes(walk(run))),
    )


def own_calls(run: Path, at: int) -> tuple[int, int]:
    """The fork's LLM calls after tick ``at`` (the rows before are the parent's, hard-linked) and how many were cache hits."""
    with ReplayReader(run) as reader:
        row = reader.query(f"SELECT count(*) AS n, count(*) FILTER (WHERE cached) AS hits FROM llm_calls WHERE step > {at}").to_pylist()[0]
    return int(row["n"]), int(row["hits"])


def per_cell(value: int, agents: int, ticks: int) -> str:
    return f"{value / (agents * ticks):,.0f}"


async def main(args: argparse.Namespace) -> None:
    agents, ticks, at = args.agents, args.ticks, args.ticks // 2
    print(f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} at start")
    tmp = Path(tempfile.mkdtemp(prefix="fork-bench-"))
    try:
        async with open_client(n_workers=2, dashboard_address="127.0.0.1:0") as client:
            prints: dict[int | None, Footprint] = {}
            for keep in (None, 0):
                started = time.perf_counter()
                summary = await run_experiment(parse_spec(spec(agents, ticks, keep)), tmp / f"keep-{keep}", client)
                took = time.perf_counter() - started
                assert summary.status == "completed", summary.error
                f = prints[keep] = footprint(tmp / f"keep-{keep}")
                print(f"keep={keep}: {took:.1f} s run, kept history {per_cell(f.kept, agents, ticks)} B/agent/tick "
                      f"(journals {per_cell(f.journals, agents, ticks)}, env snapshots {per_cell(f.snapshots, agents, ticks)}, "
                      f"history {per_cell(f.history, agents, ticks)}); du {f.total / 1e6:.1f} MB")
            extra = prints[None].kept - prints[0].kept
            print(f"live workspace: {prints[None].live / agents:,.0f} B/agent; every tick kept costs "
                  f"{per_cell(extra, agents, ticks)} B/agent/tick more than keeping the last (st_blocks * 512, unique inodes)")

            parent = tmp / "keep-None"
            started = time.perf_counter()
            point, fork = plan_fork(parent, at)
            planned = time.perf_counter() - started
            report = materialize_fork(point, fork, tmp / "fork-materialized")
            print(f"fork at tick {at} of {agents} agents: {planned + report.seconds:.2f} s (plan {planned:.2f} s + "
                  f"materialize {report.seconds:.2f} s), {report.linked_files:,} files linked, "
                  f"{report.workspace_bytes:,} bytes copied")

            first: list[float] = []

            def on_progress(progress: RunProgress) -> None:
                if not first and progress.ticks_done > at:
                    first.append(time.perf_counter() - started)

            started = time.perf_counter()
            _, forked = await fork_experiment(parent, at, tmp / "fork-run", client, on_progress=on_progress)
            took = time.perf_counter() - started
            assert forked.status == "completed", forked.error
            calls, cached = own_calls(tmp / "fork-run", at)
            print(f"fork_experiment: {first[0] if first else float('nan'):.2f} s to first committed tick, {took:.2f} s to the end "
                  f"({ticks - at} ticks); its own LLM calls: {cached:,} of {calls:,} answered by the response cache")
    finally:
        print(f"load average {os.getloadavg()[0]:.1f} at the end")
        if args.keep_dirs:
            print(f"run directories kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def cli() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=4)
    parser.add_argument("--quick", action="store_true", help="50 agents, 4 ticks (a smoke run)")
    parser.add_argument("--keep-dirs", action="store_true", help="leave the run directories for a look")
    args = parser.parse_args()
    if args.quick:
        args.agents, args.ticks = 50, 4
    asyncio.run(main(args))


if __name__ == "__main__":
    cli()
