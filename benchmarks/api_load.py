"""API load: one `polis serve` (its own process, 127.0.0.1, a temp data dir, simulated LLM) under concurrent clients.

Submits 50 tiny experiments at once, then, while they run, makes 1,000 status polls and holds 20
event streams open (one per experiment, read to its `final` event). Prints:
    submissions: <accepted>/<sent> in <s>; <final> final (<statuses>)
    polls: <n> in <s> s while the runs start and run, p50 <ms> ms
    polls once every run is final: <n/5>, p99 <ms> ms
    polls p99: <ms> ms (under load)                 (goal < 100 ms)
    streams: <opened>/<asked>, <tick events> tick events, <final events> final events
    submissions lost: <sent - accepted, plus accepted ids the listing or a final status misses>
    events lost: <sum over streamed experiments of ticks done minus distinct tick events seen>
When the service has no event stream yet (404), the stream part says so and counts nothing.
Everything is bounded: each request has a timeout and the whole run a deadline (--deadline).
The load client is aiohttp (~0.5 ms CPU per request, against httpx's ~4 ms): on 2 cores the client
shares the CPU with the service, and a heavy client would be measured as service latency.

Usage: python benchmarks/api_load.py [--submissions 50] [--polls 1000] [--streams 20] [--ticks 3] [--deadline 300]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

FINAL = {"completed", "completed_with_errors", "failed", "cancelled", "interrupted", "budget_exhausted"}


def spec(i: int, ticks: int) -> dict:
    return {
        "name": f"api-load-{i}",
        "seed": i,
        "llm": {"default": {"model": "sim/api-load"}},
        "population": [{"count": 2, "profile_template": {"name": "P{i}"}, "config": {"max_react_turns": 1}}],
        "environment": {"modules": [{"type": "MessagingSpace"}]},
        "steps": [{"type": "run", "num_steps": ticks, "tick": 600}],
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_service(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    env = {**os.environ, "POLIS_DASHBOARD_ADDRESS": "127.0.0.1:0", "POLIS_N_WORKERS": "2"}
    env.pop("POLIS_AUTH_TOKENS", None)
    log = (data_dir / "serve.log").open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "service.cli", "serve", "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(data_dir)],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )


async def wait_healthy(http: aiohttp.ClientSession, proc: subprocess.Popen[bytes], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"polis serve exited with {proc.returncode} during startup")
        try:
            async with http.get("/health") as response:
                if response.status == 200:
                    return
        except aiohttp.ClientError:
            pass
        await asyncio.sleep(0.2)
    raise TimeoutError(f"polis serve not healthy after {timeout} s")


async def submit_one(http: aiohttp.ClientSession, i: int, ticks: int) -> tuple[int, dict]:
    async with http.post("/experiments", json=spec(i, ticks)) as response:
        return response.status, await response.json()


async def submit_all(http: aiohttp.ClientSession, n: int, ticks: int) -> tuple[list[str], collections.Counter[int], float]:
    started = time.perf_counter()
    responses = await asyncio.gather(*(submit_one(http, i, ticks) for i in range(n)), return_exceptions=True)
    took = time.perf_counter() - started
    codes: collections.Counter[int] = collections.Counter()
    ids = []
    for response in responses:
        if isinstance(response, BaseException):
            codes[-1] += 1
            continue
        status, body = response
        codes[status] += 1
        if status == 201:
            ids.append(body["id"])
    return ids, codes, took


async def poll(http: aiohttp.ClientSession, ids: list[str], n: int, concurrency: int) -> tuple[list[float], int]:
    latencies: list[float] = []
    failures = 0
    slots = asyncio.Semaphore(concurrency)

    async def one(k: int) -> None:
        nonlocal failures
        async with slots:
            started = time.perf_counter()
            try:
                async with http.get(f"/experiments/{ids[k % len(ids)]}") as response:
                    await response.read()
            except aiohttp.ClientError:
                failures += 1
                return
            latencies.append(time.perf_counter() - started)
            failures += response.status != 200

    await asyncio.gather(*(one(k) for k in range(n)))
    return latencies, failures


async def stream(http: aiohttp.ClientSession, experiment_id: str, deadline: float) -> dict:
    """Read one experiment's event stream to its final event (re-opening with Last-Event-ID if it drops)."""
    ticks: set[str] = set()
    finals = 0
    last_id: str | None = None
    while time.monotonic() < deadline:
        headers = {"Accept": "text/event-stream", **({"Last-Event-ID": last_id} if last_id else {})}
        event = ""
        try:
            timeout = aiohttp.ClientTimeout(total=None, connect=10, sock_read=max(1.0, deadline - time.monotonic()))
            async with http.get(f"/experiments/{experiment_id}/events", headers=headers, timeout=timeout) as response:
                if response.status == 404:
                    return {"missing": True}
                async for raw in response.content:
                    line = raw.decode().rstrip("\r\n")
                    if line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("id:"):
                        last_id = line[3:].strip()
                    elif line == "" and event:
                        if event == "tick":
                            ticks.add(last_id or str(len(ticks)))
                        elif event == "final":
                            finals += 1
                            return {"missing": False, "ticks": len(ticks), "finals": finals}
                        event = ""
        except (aiohttp.ClientError, TimeoutError):
            await asyncio.sleep(0.2)
    return {"missing": False, "ticks": len(ticks), "finals": finals, "timed_out": True}


async def wait_final(http: aiohttp.ClientSession, ids: list[str], deadline: float) -> dict[str, dict]:
    details: dict[str, dict] = {}
    while time.monotonic() < deadline:
        async with http.get("/experiments") as response:
            listed = (await response.json())["experiments"]
        details = {e["id"]: e for e in listed}
        if all(details.get(i, {}).get("status") in FINAL for i in ids):
            break
        await asyncio.sleep(0.5)
    return details


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory(prefix="polis-api-load-") as tmp:
        port = free_port()
        proc = start_service(Path(tmp), port)
        connector = aiohttp.TCPConnector(limit=args.submissions + args.streams + 20)
        try:
            async with aiohttp.ClientSession(f"http://127.0.0.1:{port}", connector=connector,
                                             timeout=aiohttp.ClientTimeout(total=30)) as http:
                await wait_healthy(http, proc)
                deadline = time.monotonic() + args.deadline
                ids, codes, submit_s = await submit_all(http, args.submissions, args.ticks)
                streams = [asyncio.create_task(stream(http, i, deadline)) for i in ids[: args.streams]]
                poll_started = time.perf_counter()
                latencies, poll_failures = await poll(http, ids, args.polls, args.concurrency) if ids else ([], 0)
                poll_s = time.perf_counter() - poll_started
                streamed = await asyncio.gather(*streams)
                details = await wait_final(http, ids, deadline)
                idle, _ = await poll(http, ids, args.polls // 5, args.concurrency) if ids else ([], 0)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
    report(args, ids, codes, submit_s, latencies, poll_failures, poll_s, streamed, details, idle)


def p99_ms(latencies: list[float]) -> float:
    ms = sorted(1000 * s for s in latencies)
    return ms[min(len(ms) - 1, int(0.99 * len(ms)))]


def report(args, ids, codes, submit_s, latencies, poll_failures, poll_s, streamed, details, idle) -> None:
    statuses = collections.Counter(details.get(i, {}).get("status", "missing") for i in ids)
    final = sum(n for status, n in statuses.items() if status in FINAL)
    print(f"submissions: {len(ids)}/{args.submissions} accepted in {submit_s:.2f} s; {final} final ({dict(statuses)}); "
          f"codes {dict(codes)}")
    if latencies:
        ms = sorted(1000 * s for s in latencies)
        p99 = p99_ms(latencies)
        print(f"polls: {len(ms)} in {poll_s:.2f} s ({args.concurrency} at a time) while the runs start and run, "
              f"p50 {statistics.median(ms):.1f} ms, max {ms[-1]:.1f} ms, failed {poll_failures}")
        if idle:
            print(f"polls once every run is final: {len(idle)}, p99 {p99_ms(idle):.0f} ms")
        print(f"polls p99: {p99:.0f} ms")
    lost = (args.submissions - len(ids)) + sum(1 for i in ids if details.get(i, {}).get("status") not in FINAL)
    print(f"submissions lost: {lost}")
    if any(s.get("missing") for s in streamed):
        print(f"streams: GET /experiments/{{id}}/events answered 404 (not merged yet); {len(streamed)} streams not counted")
        print("events lost: n/a (no event stream)")
        return
    tick_events = sum(s["ticks"] for s in streamed)
    finals = sum(s["finals"] for s in streamed)
    timed_out = sum(1 for s in streamed if s.get("timed_out"))
    print(f"streams: {len(streamed)}/{min(args.streams, len(ids))}, {tick_events} tick events, {finals} final events, "
          f"{timed_out} timed out")
    events_lost = sum(max(0, details.get(i, {}).get("progress", {}).get("ticks_done", 0) - s["ticks"])
                      for i, s in zip(ids, streamed, strict=False))
    print(f"events lost: {events_lost}")
    if args.json:
        print(json.dumps({"p99_ms": p99 if latencies else None, "submissions_lost": lost, "events_lost": events_lost}))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=50)
    parser.add_argument("--polls", type=int, default=1000)
    parser.add_argument("--streams", type=int, default=20)
    parser.add_argument("--concurrency", type=int, default=10, help="polls in flight at once")
    parser.add_argument("--ticks", type=int, default=3)
    parser.add_argument("--deadline", type=float, default=300.0, help="seconds for the whole load, runs included")
    parser.add_argument("--json", action="store_true", help="also print the three figures as one JSON line")
    asyncio.run(main(parser.parse_args()))
