"""How long stopping and recovering take: SIGINT to exit, a lost env actor, a resume after SIGKILL.

Runs a 200-agent messaging spec on the simulated LLM (batch size 50) and prints:
    sigint: <seconds from SIGINT to the driver's exit, status cancelled, no process left>
    actor loss: <seconds of the tick that lost its env actor's worker> vs <median of the other ticks>
    resume: <seconds of `polis run --resume` after a SIGKILL mid-tick> vs <the same run uninterrupted>

Usage: python benchmarks/recovery.py [--agents 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

from engine.society.lease import effective_status
from engine.society.run.cluster import open_client
from engine.society.run.dashboard import ENV_ROUTER, key_kind
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec


def spec(agents: int, ticks: int) -> dict:
    return {
        "name": "recovery",
        "seed": 2,
        "llm": {"default": {"model": "sim/default:recovery"}},
        "population": [{"count": agents, "profile_template": {"name": "P{i}"}, "config": {"max_react_turns": 2}}],
        "environment": {"modules": [{"type": "MessagingSpace"}]},
        "steps": [{"type": "run", "num_steps": ticks, "tick": 600}],
        "batch_size": 50,
    }


def driver(args: list[str], failpoints: str | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "POLIS_DASHBOARD_ADDRESS": "127.0.0.1:0"}
    if failpoints:
        env["POLIS_FAILPOINTS"] = failpoints
    return subprocess.Popen([sys.executable, "-m", "engine.cli", *args], env=env, start_new_session=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def sigint(tmp: Path, agents: int) -> None:
    path = tmp / "sigint.yaml"
    path.write_text(yaml.safe_dump(spec(agents, 50)))
    run = tmp / "sigint"
    proc = driver(["run", str(path), "--run-dir", str(run)])
    while not (run / "SOCIETY_STEP.json").exists() or '"step_count": 1' not in (run / "SOCIETY_STEP.json").read_text():
        time.sleep(0.05)
    sent = time.perf_counter()
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    took = time.perf_counter() - sent
    while not gone(proc.pid) and time.perf_counter() - sent < 30:
        time.sleep(0.05)
    print(f"sigint: {took:.2f} s to exit (code {proc.returncode}), status {effective_status(run)}, "
          f"processes left: {'none' if gone(proc.pid) else 'SOME'}")


async def actor_loss(tmp: Path, agents: int) -> None:
    async with open_client(n_workers=2, dashboard_address="127.0.0.1:0") as client:
        killed = False

        def on_progress(p) -> None:  # type: ignore[no-untyped-def]
            nonlocal killed
            if not killed and p.ticks_done == 2 and p.agent_steps_done >= 2 * agents + 50:
                killed = True
                asyncio.get_running_loop().create_task(kill())

        async def kill() -> None:
            who = await client.who_has()
            address = next(a[0] for k, a in who.items() if key_kind(k) == ENV_ROUTER and a)
            os.kill((await client.run(os.getpid))[address], signal.SIGKILL)

        summary = await run_experiment(parse_spec(spec(agents, 5)), tmp / "actor", client, on_progress=on_progress)
    ticks = list(summary.tick_seconds)
    others = ticks[:2] + ticks[3:]
    print(f"actor loss: status {summary.status}, {summary.env_recoveries} recovery; tick 3 took {ticks[2]:.2f} s "
          f"vs median {statistics.median(others):.2f} s for the other ticks")


def resume(tmp: Path, agents: int) -> None:
    path = tmp / "resume.yaml"
    path.write_text(yaml.safe_dump(spec(agents, 4)))
    started = time.perf_counter()
    clean = driver(["run", str(path), "--run-dir", str(tmp / "clean")])
    clean.communicate(timeout=600)
    uninterrupted = time.perf_counter() - started
    crashed = driver(["run", str(path), "--run-dir", str(tmp / "crashed")], failpoints="mid_batch:step=3:nth=20")
    crashed.communicate(timeout=600)
    started = time.perf_counter()
    resumed = driver(["run", "--resume", str(tmp / "crashed")])
    resumed.communicate(timeout=600)
    print(f"resume: {time.perf_counter() - started:.2f} s to finish ticks 3-4 after SIGKILL (exit {resumed.returncode}) "
          f"vs {uninterrupted:.2f} s for all 4 ticks uninterrupted (killed run exit {crashed.returncode})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        sigint(Path(tmp), args.agents)
        asyncio.run(actor_loss(Path(tmp), args.agents))
        resume(Path(tmp), args.agents)


if __name__ == "__main__":
    main()
