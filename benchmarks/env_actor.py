"""The env actor under load, on the default LocalCluster (2 worker processes).

(a) 500 concurrent asks, each routed by an LLM with 200 ms latency (the simulated LLM over real
    HTTP), against MessagingSpace, which is not concurrency-safe. Serial time is 500 x 0.2 s;
    prints `speedup: N.Nx` (goal >= 20x).
(b) 20,000 zero-latency tool calls (no LLM) from 4 batch tasks spread over the 2 workers, each
    coalesced into `ask_many` actor calls; prints `throughput: N calls/s` (goal >= 5,000/s; one
    plain actor call per request gives ~540/s here).
(c) generated code (a tool call, statistics, results) run N times through each executor, in this
    process: in a thread of the caller (cooperative limits only, the old path) and in a
    pre-started sandbox process (OS limits, tool calls over the pipe); prints the pool's start-up
    and `sandbox_exec: thread X ms  process Y ms` (medians per execution; the code is the same each
    time, so the guard compiles it once and the figure is the execution alone), then the same code
    from 64 concurrent callers through the 2-process pool, in executions/s.

Usage: python benchmarks/env_actor.py [--asks 500] [--latency-ms 200] [--calls 20000] [--executions 500]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from datetime import datetime
from typing import Any

from distributed import Client

from engine.env.actor import EnvRouterActor, EnvRouterConfig
from engine.env.proxy import EnvRouterProxy
from engine.env.requests import EnvRequest
from engine.env.sandbox import Executor, SandboxPool, SandboxTool, ThreadExecutor, execute
from engine.llm.client import LimiterConfig, LLMClient
from engine.llm.sim import SimFaults, SimLLM
from engine.llm.sim.background import serving
from engine.society.run.cluster import open_client

START = datetime(2026, 1, 1, 8)


async def _asks(proxy: EnvRouterProxy, n: int) -> list[str]:
    """A batch task: n agents each ask the env once, concurrently."""
    replies = await asyncio.gather(*(proxy.ask(EnvRequest("ask", i, f"send agent {(i + 1) % n} a greeting")) for i in range(n)))
    return [reply.status for reply in replies]


async def _tool_calls(proxy: EnvRouterProxy, first: int, n: int) -> int:
    """A batch task: n direct tool calls (no LLM), concurrently."""
    await asyncio.gather(
        *(proxy.call_tool("send_message", {"agent_id": first + i, "to_agent_id": first + i, "content": "hi"}) for i in range(n))
    )
    return n


async def _actor(client: Client, coder: LLMClient, agents: int) -> tuple[object, EnvRouterProxy]:
    config = EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react", max_steps=1, coder=coder)
    actor = await client.submit(EnvRouterActor, config, actor=True)
    await actor.init(START, list(range(agents)))
    return actor, EnvRouterProxy(address=actor._address, key=actor.key)


#: Typical generated code: one tool call, a little arithmetic, a results dict.
SANDBOX_CODE = """
r = send_message(to_agent_id=2, content='hi')
values = [3, 1, 4, 1, 5, 9, 2, 6]
results['answer'] = r
results['mean'] = statistics.mean(values)
results['top'] = sorted(values)[-3:]
"""


async def _send(arguments: dict[str, Any]) -> str:
    return f"message to agent {arguments['to_agent_id']} queued for delivery"


SANDBOX_TOOLS = [SandboxTool("send_message", ("to_agent_id", "content"), False, _send, {"agent_id": 1})]


async def _median_ms(executor: Executor, n: int) -> float:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        result = await execute(SANDBOX_CODE, SANDBOX_TOOLS, ctx={"agent_id": 1}, executor=executor)
        times.append(time.perf_counter() - started)
        assert result.ok, result.error
    return statistics.median(times) * 1000


async def sandbox_exec(n: int) -> None:
    pool = SandboxPool(2)
    try:
        start_s = await pool.start()
        await _median_ms(pool, 20)  # warm both paths
        await _median_ms(ThreadExecutor(), 20)
        thread_ms = await _median_ms(ThreadExecutor(), n)
        process_ms = await _median_ms(pool, n)
        started = time.perf_counter()
        lanes = 64
        await asyncio.gather(*(_median_ms(pool, n // lanes) for _ in range(lanes)))
        concurrent = lanes * (n // lanes) / (time.perf_counter() - started)
    finally:
        await pool.close()
    print(
        f"(c) {n} executions of a tool call + statistics + results per path; sandbox pool of 2 started in {start_s * 1000:.0f} ms"
    )
    print(f"sandbox_exec: thread {thread_ms:.2f} ms  process {process_ms:.2f} ms  (median per execution)")
    print(f"    process path, 64 concurrent callers: {concurrent:.0f} executions/s")


async def main(args: argparse.Namespace) -> None:
    with serving(SimLLM(name="env-bench", seed=1), SimFaults(latency_ms=args.latency_ms)) as url:
        async with open_client(dashboard_address="127.0.0.1:0") as client:
            coder = LLMClient(
                role="coder", model="openai/sim", base_url=f"{url}/v1", limits=LimiterConfig(concurrency=args.concurrency)
            )
            actor, proxy = await _actor(client, coder, args.asks)
            started = time.perf_counter()
            statuses = await client.submit(_asks, proxy, args.asks, pure=False)
            elapsed = time.perf_counter() - started
            usage = await actor.usage()
            serial = args.asks * args.latency_ms / 1000
            print(f"(a) {args.asks} asks, LLM latency {args.latency_ms:.0f} ms, non-concurrency-safe module")
            print(
                f"    statuses: { {s: statuses.count(s) for s in sorted(set(statuses))} }  router LLM calls: {usage['calls']}"
                f"  actor calls: {usage['batches']}"
            )
            print(f"    elapsed: {elapsed:.2f} s  serial: {serial:.0f} s")
            print(f"speedup: {serial / elapsed:.1f}x")

            actor, proxy = await _actor(client, LLMClient(role="coder", model="sim/default:unused"), args.calls)
            per_task = args.calls // 4
            workers = list(await client.run(lambda: None))  # worker addresses
            started = time.perf_counter()
            futures = [
                client.submit(_tool_calls, proxy, i * per_task, per_task, pure=False, workers=[workers[i % len(workers)]])
                for i in range(4)
            ]
            done = sum(await client.gather(futures))
            elapsed = time.perf_counter() - started
            usage = await actor.usage()
            print(
                f"(b) {done} tool calls from 4 batch tasks on {len(workers)} workers in {usage['batches']} actor calls,"
                f" {elapsed:.2f} s"
            )
            print(f"throughput: {done / elapsed:.0f} calls/s")
    await sandbox_exec(args.executions)


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--asks", type=int, default=500)
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--concurrency", type=int, default=256, help="initial AIMD limit of the router's LLM client")
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--executions", type=int, default=500, help="(c) executions of generated code per path")
    asyncio.run(main(parser.parse_args()))
