"""API load: one `polis serve` (its own process, 127.0.0.1, tokens for two owners, simulated LLM) under many clients.

Three scenarios, each on a fresh service and data directory (issue 33's figures):

- ``submits``: ``--clients`` clients submit tiny experiments for ``--seconds``, each request with an
  ``Idempotency-Key``; every fourth request retries the client's previous key. Prints answered submits
  per second (goal >= 100), p50/p99 latency (goal p99 <= 1 s), unanswered requests, and the
  experiments the service holds against the unique keys sent (goal: equal).
- ``sweep``: lab-a submits the 10,000-replication sweep; once its cells run, lab-b submits a 1-tick run.
  Prints how long lab-b's run took to start (goal <= 5 s) and to end, how long ``POST .../cancel`` of the
  sweep took to answer (goal <= 1 s), and how long until the sweep was ``cancelled``.
- ``gets``: a few multi-tick runs go, one event stream is read, and ``--clients`` clients poll
  ``GET /experiments/{id}`` for ``--seconds``. Prints p50/p99 (goal p99 <= 300 ms) and timeouts.

The load client is aiohttp (~0.5 ms CPU per request, against httpx's ~4 ms): on 2 cores the client shares
the CPU with the service, so its own cost is measured as service latency; a lighter client lowers the figures.

Usage: python benchmarks/api_load.py [--scenario submits,sweep,gets] [--clients 200] [--seconds 30]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp

from service.admission.auth import create_token

FINAL = {"completed", "completed_with_errors", "failed", "cancelled", "interrupted", "budget_exhausted"}
#: The reproducer of issue 33: one agent, one tick, 10,000 replications.
TINY_SWEEP = {"name": "t", "llm": {"default": {"model": "sim/default"}}, "agents": [{"id": 0}],
              "steps": [{"type": "run", "num_steps": 1}], "sweep": {"replications": 10_000}}


def spec(name: str, ticks: int = 1, agents: int = 2) -> dict:
    return {
        "name": name,
        "llm": {"default": {"model": "sim/default:api-load"}},
        "population": [{"count": agents, "profile_template": {"name": "P{i}"}, "config": {"max_react_turns": 1}}],
        "environment": {"modules": [{"type": "MessagingSpace"}]},
        "steps": [{"type": "run", "num_steps": ticks, "tick": 600}],
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Service:
    """A `polis serve` process with tokens for lab-a and lab-b."""

    def __init__(self, root: Path) -> None:
        self.root, self.port = root, free_port()
        tokens = root / "tokens.json"
        self.tokens = {owner: create_token(tokens, owner) for owner in ("lab-a", "lab-b")}
        env = {**os.environ, "POLIS_DASHBOARD_ADDRESS": "127.0.0.1:0", "POLIS_N_WORKERS": "2",
               "POLIS_AUTH_TOKENS": str(tokens)}
        log = (root / "serve.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "polis.cli", "serve", "--host", "127.0.0.1", "--port", str(self.port),
             "--data-dir", str(root / "data")],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )

    def headers(self, owner: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[owner]}"}

    async def wait_healthy(self, http: aiohttp.ClientSession, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"polis serve exited with {self.proc.returncode}; see {self.root / 'serve.log'}")
            try:
                async with http.get("/health") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.2)
        raise TimeoutError(f"polis serve not healthy after {timeout} s")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()


@asynccontextmanager
async def serving(clients: int) -> AsyncIterator[tuple[Service, aiohttp.ClientSession]]:
    with tempfile.TemporaryDirectory(prefix="polis-api-load-") as tmp:
        service = Service(Path(tmp))
        connector = aiohttp.TCPConnector(limit=clients + 20)
        try:
            async with aiohttp.ClientSession(f"http://127.0.0.1:{service.port}", connector=connector,
                                             timeout=aiohttp.ClientTimeout(total=30)) as http:
                await service.wait_healthy(http)
                yield service, http
        finally:
            service.stop()


def percentile_ms(latencies: list[float], share: float) -> float:
    ms = sorted(1000 * s for s in latencies)
    return ms[min(len(ms) - 1, int(share * len(ms)))] if ms else float("nan")


async def scenario_submits(args: argparse.Namespace) -> None:
    async with serving(args.clients) as (service, http):
        headers = service.headers("lab-a")
        latencies: list[float] = []
        codes: collections.Counter[int | str] = collections.Counter()
        keys_sent: set[str] = set()
        ids_by_key: dict[str, set[str]] = collections.defaultdict(set)
        deadline = time.monotonic() + args.seconds

        async def client(number: int) -> None:
            sent, previous = 0, None
            while time.monotonic() < deadline:
                retry = previous is not None and sent % 4 == 3
                key = previous if retry else f"c{number}-{sent}"
                assert key is not None
                keys_sent.add(key)
                started = time.perf_counter()
                try:
                    async with http.post("/experiments", json=spec(f"load-{key}"),
                                         headers={**headers, "Idempotency-Key": key}) as response:
                        body = await response.json()
                        codes[response.status] += 1
                        if response.status == 201:
                            ids_by_key[key].add(body["id"])
                except (aiohttp.ClientError, TimeoutError) as error:
                    codes[type(error).__name__] += 1
                    continue
                finally:
                    sent += 1
                latencies.append(time.perf_counter() - started)
                previous = key

        began = time.perf_counter()
        await asyncio.gather(*(client(n) for n in range(args.clients)))
        took = time.perf_counter() - began
        async with http.get("/experiments", headers=headers, timeout=aiohttp.ClientTimeout(total=120)) as response:
            held = [e for e in (await response.json())["experiments"] if e["name"].startswith("load-")]
    answered = len(latencies)
    print(f"submits: {args.clients} clients for {args.seconds:.0f} s: {answered} answered in {took:.1f} s "
          f"= {answered / took:.1f}/s (goal >= 100); codes {dict(codes)}")
    print(f"submit latency: p50 {percentile_ms(latencies, 0.5):.0f} ms, p99 {percentile_ms(latencies, 0.99):.0f} ms "
          f"(goal <= 1000), max {percentile_ms(latencies, 1.0):.0f} ms")
    doubled = sum(1 for ids in ids_by_key.values() if len(ids) > 1)
    print(f"idempotency: {len(keys_sent)} unique keys sent, {len(ids_by_key)} answered 201, {len(held)} experiments "
          f"held (goal: equal to the keys answered), {doubled} keys answered with two ids (goal 0)")


async def wait_for(http: aiohttp.ClientSession, path: str, headers: dict[str, str], done, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        async with http.get(path, headers=headers) as response:
            body = await response.json()
        if done(body) or time.monotonic() > deadline:
            return body
        await asyncio.sleep(0.05)


async def scenario_sweep(args: argparse.Namespace) -> None:
    async with serving(10) as (service, http):
        lab_a, lab_b = service.headers("lab-a"), service.headers("lab-b")
        started = time.perf_counter()
        async with http.post("/experiments", json=TINY_SWEEP, headers=lab_a) as response:
            assert response.status == 201, await response.text()
            sweep = (await response.json())["id"]
        submit_s = time.perf_counter() - started
        await wait_for(http, f"/experiments/{sweep}", lab_a, lambda b: b["progress"]["ticks_done"] >= 1)
        submitted = time.perf_counter()
        async with http.post("/experiments", json=spec("lab-b-run"), headers=lab_b) as response:
            other = (await response.json())["id"]
        running = await wait_for(http, f"/experiments/{other}", lab_b, lambda b: b["status"] != "queued")
        start_s = time.perf_counter() - submitted
        ended = await wait_for(http, f"/experiments/{other}", lab_b, lambda b: b["status"] in FINAL)
        end_s = time.perf_counter() - submitted
        asked = time.perf_counter()
        async with http.post(f"/experiments/{sweep}/cancel", headers=lab_a) as response:
            cancel_code = response.status
        cancel_s = time.perf_counter() - asked
        final = await wait_for(http, f"/experiments/{sweep}", lab_a, lambda b: b["status"] in FINAL)
        final_s = time.perf_counter() - asked
    print(f"sweep: the 10,000-replication sweep answered 201 in {submit_s * 1000:.0f} ms")
    print(f"sweep: lab-b's 1-tick run started after {start_s:.2f} s (goal <= 5; status then {running['status']}), "
          f"ended {ended['status']} after {end_s:.2f} s")
    print(f"sweep: cancel answered {cancel_code} in {cancel_s * 1000:.0f} ms (goal <= 1000); the sweep was "
          f"{final['status']} {final_s:.2f} s after the cancel, {final['progress']['ticks_done']} cells' ticks done")


async def scenario_gets(args: argparse.Namespace) -> None:
    async with serving(args.clients) as (service, http):
        headers = service.headers("lab-a")
        ids = []
        for index in range(4):
            async with http.post("/experiments", json=spec(f"gets-{index}", ticks=200, agents=4), headers=headers) as response:
                ids.append((await response.json())["id"])
        events = collections.Counter()

        async def stream() -> None:
            timeout = aiohttp.ClientTimeout(total=None, sock_read=args.seconds + 30)
            async with http.get(f"/experiments/{ids[0]}/events", headers={**headers, "Accept": "text/event-stream"},
                                timeout=timeout) as response:
                async for raw in response.content:
                    if raw.startswith(b"event:"):
                        events[raw[6:].strip().decode()] += 1

        reader = asyncio.create_task(stream())
        await wait_for(http, f"/experiments/{ids[0]}", headers, lambda b: b["status"] == "running")
        latencies: list[float] = []
        failures: collections.Counter[str] = collections.Counter()
        deadline = time.monotonic() + args.seconds

        async def client(number: int) -> None:
            k = number
            while time.monotonic() < deadline:
                started = time.perf_counter()
                try:
                    async with http.get(f"/experiments/{ids[k % len(ids)]}", headers=headers,
                                        timeout=aiohttp.ClientTimeout(total=5)) as response:
                        await response.read()
                        if response.status != 200:
                            failures[str(response.status)] += 1
                            continue
                except (aiohttp.ClientError, TimeoutError) as error:
                    failures[type(error).__name__] += 1
                    continue
                latencies.append(time.perf_counter() - started)
                k += 1

        began = time.perf_counter()
        await asyncio.gather(*(client(n) for n in range(args.clients)))
        took = time.perf_counter() - began
        reader.cancel()
        for experiment in ids:
            async with http.post(f"/experiments/{experiment}/cancel", headers=headers):
                pass
    print(f"gets: {args.clients} clients for {args.seconds:.0f} s with an event stream open ({dict(events)} events "
          f"read): {len(latencies)} answered, {len(latencies) / took:.0f}/s; failures {dict(failures) or 0}")
    print(f"gets: p50 {statistics.median(1000 * s for s in latencies):.0f} ms, p99 {percentile_ms(latencies, 0.99):.0f} ms "
          f"(goal <= 300), max {percentile_ms(latencies, 1.0):.0f} ms")


SCENARIOS = {"submits": scenario_submits, "sweep": scenario_sweep, "gets": scenario_gets}


async def main(args: argparse.Namespace) -> None:
    print(f"{os.cpu_count()} cores; {args.clients} clients, {args.seconds:.0f} s per timed scenario")
    for name in args.scenario.split(","):
        await SCENARIOS[name](args)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", default="submits,sweep,gets", help="comma-separated: submits, sweep, gets")
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=30.0)
    asyncio.run(main(parser.parse_args()))
