"""What making each agent-step a transaction costs: the step journal next to the rest of a step's workspace I/O.

Runs the demo population (20 people, full agent runtime, 3 ticks) to get real workspaces, then, in
one process and interleaved round by round, times per workspace:
    journal: StepJournal.begin + rollback + discard (what a re-run step costs; a normal step pays begin + discard)
    begin+discard: what every agent-step pays
    workspace I/O: PersonAgent.from_workspace + to_workspace (the I/O every step already did)
Prints milliseconds per agent-step and the ratio of the journal's cost to the workspace I/O.

Usage: python benchmarks/step_journal.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import yaml

from engine.agent.journal import StepJournal
from engine.agent.person import PersonAgent
from engine.agent.service_proxy import ServiceProxy
from engine.llm.client import LLMClient
from engine.society.run.cluster import open_client
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec

DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo.yaml"


async def main(args: argparse.Namespace) -> None:
    spec = parse_spec(yaml.safe_load(DEMO.read_text()))
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        async with open_client(dashboard_address="127.0.0.1:0") as client:
            summary = await run_experiment(spec, run_dir, client)
        assert summary.status == "completed", summary.error
        workspaces = sorted((run_dir / "agents").iterdir())
        files = sum(1 for ws in workspaces for p in ws.rglob("*") if p.is_file() and ".runtime/txn" not in str(p))
        print(f"workspaces: {len(workspaces)} after {spec.total_ticks()} ticks, {files / len(workspaces):.1f} files each")

        proxy = ServiceProxy(env=None, llm={"default": LLMClient(model="sim/default:bench")}, run_dir=run_dir)
        step = 1000
        begin_discard: list[float] = []
        with_rollback: list[float] = []
        io: list[float] = []
        for _ in range(args.rounds):
            started = time.perf_counter()
            for ws in workspaces:
                journal = StepJournal(ws)
                journal.begin(step)
                journal.discard(step)
            begin_discard.append((time.perf_counter() - started) / len(workspaces))

            started = time.perf_counter()
            for ws in workspaces:
                journal = StepJournal(ws)
                journal.begin(step)
                journal.rollback(step)
                journal.discard(step)
            with_rollback.append((time.perf_counter() - started) / len(workspaces))

            started = time.perf_counter()
            for ws in workspaces:
                agent = await PersonAgent.from_workspace(ws, proxy)
                await agent.to_workspace()
            io.append((time.perf_counter() - started) / len(workspaces))

        ms = {name: statistics.median(v) * 1000 for name, v in
              {"begin+discard": begin_discard, "journal": with_rollback, "workspace I/O": io}.items()}
        for name, value in ms.items():
            print(f"{name}: {value:.3f} ms per agent-step")
        print(f"ratio begin+discard / workspace I/O: {ms['begin+discard'] / ms['workspace I/O']:.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    asyncio.run(main(parser.parse_args()))
