"""The same run on an S3-protocol server and on a local disk, side by side: warm tick seconds and their ratio.

Starts moto's S3 server (``moto_server``, a test dependency) as its own process on 127.0.0.1, points the
standard AWS environment at it, starts one LocalCluster (its workers inherit that environment), then runs
the scale benchmark's spec (--agents agents, --ticks ticks, one decision per agent-step on the in-process
simulated LLM, packed workspaces) alternately into a local directory and into ``s3://polis-bench/run-<n>``.
Prints each run's ticks, the warm tick (the best of ticks 2..), the ratio s3/local, and the objects and bytes
the bucket holds per agent-tick. moto is a Python server on the same 2 cores: the ratio bounds what a real
S3 endpoint costs from above, it does not predict it.

Usage: python benchmarks/object_storage.py [--agents 1000] [--ticks 3] [--repeat 1]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # rundirs and scale, when run as a script

from rundirs import disk_usage, filesystem, positive, run_root  # noqa: E402
from scale import spec  # noqa: E402

from engine.society.run.cluster import open_client  # noqa: E402
from engine.society.run.runner import run_experiment  # noqa: E402
from engine.spec import parse_spec  # noqa: E402
from engine.storage.run_layout import run_store  # noqa: E402

BUCKET = "polis-bench"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_moto() -> tuple[subprocess.Popen[bytes], str]:
    """moto's S3 server in its own process; returns it and its endpoint once it answers."""
    command = shutil.which("moto_server", path=str(Path(sys.executable).parent)) or "moto_server"
    port = _free_port()
    server = subprocess.Popen([command, "-H", "127.0.0.1", "-p", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return server, f"http://127.0.0.1:{port}"
        except OSError:
            if server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("moto_server did not start (pip install 'moto[server]')") from None
            time.sleep(0.1)


async def one_run(client: object, agents: int, ticks: int, where: str | Path) -> float:
    started = time.perf_counter()
    summary = await run_experiment(parse_spec(spec(agents, ticks, "packed")), where, client)
    assert summary.status == "completed", summary.error
    warm = min(summary.tick_seconds[1:]) if len(summary.tick_seconds) > 1 else summary.tick_seconds[0]
    if isinstance(where, str):
        store = run_store(where)
        objects, size = len(store.list_prefix("")), store.usage()
    else:
        objects, size = disk_usage(where)
    kind = "s3" if isinstance(where, str) else "local"
    print(f"  [{kind}] ticks {', '.join(f'{t:.2f}' for t in summary.tick_seconds)} s; warm {agents / warm:,.0f} agent-steps/s; "
          f"{objects:,} objects ({objects / (agents * ticks):.4f} per agent-tick), {size / 1e6:,.1f} MB "
          f"({size / (agents * ticks):,.0f} bytes per agent-tick); whole run {time.perf_counter() - started:.1f} s", flush=True)
    return warm


async def main(args: argparse.Namespace) -> None:
    server, endpoint = start_moto()
    try:
        os.environ.update({"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench", "AWS_DEFAULT_REGION": "us-east-1",
                           "AWS_ENDPOINT_URL": endpoint})
        import boto3  # botocore's client, as s3fs uses it

        boto3.client("s3").create_bucket(Bucket=BUCKET)
        with run_root() as root:
            print(f"local run directories on {filesystem(root)} ({root}); moto S3 at {endpoint}; {os.cpu_count()} cores")
            async with open_client(dashboard_address="127.0.0.1:0") as client:
                warm: dict[str, list[float]] = {"local": [], "s3": []}
                for n in range(args.repeat):
                    for kind in ("local", "s3") if n % 2 == 0 else ("s3", "local"):
                        where: str | Path = f"s3://{BUCKET}/run-{n}" if kind == "s3" else root / f"local-{n}"
                        warm[kind].append(await one_run(client, args.agents, args.ticks, where))
            best = {kind: min(values) for kind, values in warm.items()}
            print(f"{args.agents:,} agents: warm tick s3 {best['s3']:.2f} s, local {best['local']:.2f} s: "
                  f"ratio s3/local {best['s3'] / best['local']:.2f} (no goal yet)")
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=positive, default=1000)
    parser.add_argument("--ticks", type=positive, default=3)
    parser.add_argument("--repeat", type=positive, default=1, help="side-by-side rounds (alternated)")
    asyncio.run(main(parser.parse_args()))
