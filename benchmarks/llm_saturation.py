"""LLM saturation: 1,000 callers in one process against a simulated LLM with a hard capacity, over HTTP.

The simulated LLM runs in its own process (default: 256 concurrent calls, 200 ms each, so at most
1,280 calls/s; beyond capacity it answers 429 at once). The callers are asyncio tasks in this
process, each making ``--calls`` calls one after another through the dispatcher's model for an
OpenAI-compatible client (``get_chat_model``: ``RetryingModel(LimitedModel(TimeoutModel(
OpenAIHTTPChatModel)))`` under single-flight): the AIMD limiter alone decides how many are in
flight. Prints:
    calls: <ok> ok, <failed> failed in <s> s
    achieved: <calls/s>; bound: <capacity / latency> calls/s
    ratio: <achieved / bound>
    429s: <answered 429 by the server, from /stats>
    limit: final <n>, max <n>, decreases <n>
and writes a PNG of the limit (blue) and the calls in flight (orange) over time.

``--overhead`` first measures the client's own ceiling against a zero-latency, unlimited server
(64 callers, 5 s each, one after another in one run): the aiohttp transport's calls/s, bare
litellm's, and raw httpx POSTs/s, then also prints the ratio against ``min(bound, transport
ceiling)``. One run on 2026-12-01, 2 cores shared with neighbours (load average about 2):

    client ceiling (zero-latency sim, 64 callers): aiohttp transport 1575 calls/s, litellm 68 calls/s,
        raw httpx 54 calls/s
    calls: 4998 ok, 2 failed in 13.56 s (2 LLMRateLimitError(429))
    achieved: 368.5 calls/s; bound: 1280 calls/s
    429s: 1477 (over capacity 1477, injected 0)
    limit: final 312, max 512, decreases 3

(An earlier run at load average 1.2 measured the ceilings at 1898 / 84 / 74 calls/s.)

Usage: python benchmarks/llm_saturation.py [--agents 1000] [--calls 5] [--capacity 256]
       [--latency-ms 200] [--rate-429 0.3] [--concurrency 16] [--png PATH] [--overhead]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing
import socket
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))  # pngplot, when run as a script

from pngplot import line_plot, write_png  # noqa: E402

from engine.errors import LLMCallError  # noqa: E402
from engine.llm.client import LimiterConfig, LLMClient  # noqa: E402
from engine.llm.dispatcher import get_chat_model, limiter_for  # noqa: E402
from engine.llm.protocol import ChatModel  # noqa: E402
from engine.llm.sim import SimFaults, SimLLM  # noqa: E402
from engine.llm.sim.server import create_app  # noqa: E402

DEFAULT_PNG = Path(__file__).resolve().parent / "out" / "llm_saturation.png"


def serve(port: int, faults: SimFaults) -> None:
    """The child process: uvicorn with a keep-alive longer than the client pool's (15 s).

    With uvicorn's default 5 s, connections left idle after the limit shrinks are closed by the
    server while the client still pools them, and the next call on one fails ("Server disconnected").
    (The aiohttp transport keeps idle connections 4 s and re-sends once on such a disconnect; the
    long keep-alive is for litellm and httpx.)
    """
    import uvicorn

    app = create_app(SimLLM(name="bench", seed=1), faults)
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", timeout_keep_alive=60)


@contextlib.contextmanager
def sim_server(faults: SimFaults) -> Iterator[str]:
    """The simulated LLM in a child process (its own core and GIL); yields its base URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = multiprocessing.get_context("spawn").Process(target=serve, args=(port, faults), daemon=True)
    process.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(url + "/health", timeout=1).raise_for_status()
            break
        except httpx.HTTPError:
            if not process.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the simulated LLM server did not start") from None
            time.sleep(0.05)
    try:
        yield url
    finally:
        process.terminate()
        process.join(10)


async def drive(model: ChatModel, agents: int, calls: int) -> tuple[int, Counter[str], float]:
    """Run ``agents`` callers making ``calls`` calls each; return (ok, failures by kind, seconds)."""
    ok = 0
    failed: Counter[str] = Counter()

    async def agent(i: int) -> None:
        nonlocal ok
        for k in range(calls):
            try:
                await model.complete([{"role": "user", "content": f"agent {i}, call {k}: say something"}])
                ok += 1
            except LLMCallError as error:
                failed[f"{type(error).__name__}({error.status})"] += 1
            except Exception as error:  # noqa: BLE001 - a benchmark counts what escapes the stack, by type
                failed[f"unwrapped {type(error).__module__}.{type(error).__name__}"] += 1

    started = time.perf_counter()
    await asyncio.gather(*(agent(i) for i in range(agents)))
    return ok, failed, time.perf_counter() - started


async def calls_per_second(call: Callable[[], Awaitable[object]], *, width: int, seconds: float) -> float:
    """How many ``call()``s per second ``width`` concurrent loops complete over ``seconds``."""
    await asyncio.gather(*(call() for _ in range(width)))  # warm the connections up
    done = 0
    end = time.perf_counter() + seconds

    async def loop() -> None:
        nonlocal done
        while time.perf_counter() < end:
            await call()
            done += 1

    started = time.perf_counter()
    await asyncio.gather(*(loop() for _ in range(width)))
    return done / (time.perf_counter() - started)


async def client_ceilings(seconds: float = 5.0, width: int = 64) -> dict[str, float]:
    """Calls/s of the bare aiohttp transport, bare litellm and raw httpx POSTs against one
    zero-latency, unlimited sim, one after another in this process."""
    from engine.llm.litellm_backend import LiteLLMChatModel
    from engine.llm.openai_http import OpenAIHTTPChatModel

    messages = [{"role": "user", "content": "say something"}]
    ceilings: dict[str, float] = {}
    with sim_server(SimFaults()) as url:
        client = LLMClient(model="openai/bench", base_url=url + "/v1")
        transport = OpenAIHTTPChatModel(client)
        ceilings["aiohttp transport"] = await calls_per_second(
            lambda: transport.complete(messages), width=width, seconds=seconds
        )
        litellm_model = LiteLLMChatModel(client)
        ceilings["litellm"] = await calls_per_second(lambda: litellm_model.complete(messages), width=width, seconds=seconds)
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=width)) as http:

            async def post() -> None:
                body = {"model": "bench", "messages": messages}
                (await http.post(url + "/v1/chat/completions", json=body)).raise_for_status()

            ceilings["raw httpx"] = await calls_per_second(post, width=width, seconds=seconds)
    return ceilings


async def sample(limiter, trace: list[tuple[float, int, int]], every: float = 0.01) -> None:  # type: ignore[no-untyped-def]
    """Record (time, limit, in flight) until cancelled."""
    while True:
        trace.append((time.monotonic(), limiter.limit, limiter.in_flight))
        await asyncio.sleep(every)


async def main(args: argparse.Namespace) -> None:
    ceiling = None
    if args.overhead:
        ceilings = await client_ceilings()
        figures = ", ".join(f"{name} {value:.0f} calls/s" for name, value in ceilings.items())
        print(f"client ceiling (zero-latency sim, 64 callers): {figures}")
        ceiling = ceilings["aiohttp transport"]  # the dispatcher's transport for this client
    faults = SimFaults(latency_ms=args.latency_ms, capacity=args.capacity, rate_429=args.rate_429, seed=1)
    bound = args.capacity / (args.latency_ms / 1000)
    print(
        f"agents: {args.agents} x {args.calls} calls; server: capacity {args.capacity}, "
        f"latency {args.latency_ms:g} ms, rate_429 {args.rate_429:g}; initial limit {args.concurrency}"
    )
    with sim_server(faults) as url:
        client = LLMClient(model="openai/bench", base_url=url + "/v1", limits=LimiterConfig(concurrency=args.concurrency))
        model = get_chat_model(client)
        limiter = limiter_for(client)
        assert limiter is not None
        trace: list[tuple[float, int, int]] = []
        sampler = asyncio.create_task(sample(limiter, trace))
        ok, failed, seconds = await drive(model, args.agents, args.calls)
        sampler.cancel()
        stats = httpx.get(url + "/stats").json()["outcomes"]
    achieved = ok / seconds
    rejected = stats["rejected_capacity"] + stats["injected_429"]
    limits = [limit for _, limit in limiter.history]
    kinds = ", ".join(f"{n} {kind}" for kind, n in failed.most_common())
    print(f"calls: {ok} ok, {failed.total()} failed in {seconds:.2f} s" + (f" ({kinds})" if kinds else ""))
    print(f"achieved: {achieved:.1f} calls/s; bound: {bound:.0f} calls/s")
    print(f"ratio: {achieved / bound:.2f}")
    if ceiling is not None:
        effective = min(bound, ceiling)
        print(f"ratio vs min(bound, transport ceiling) = {effective:.0f} calls/s: {achieved / effective:.2f}")
    print(f"429s: {rejected} (over capacity {stats['rejected_capacity']}, injected {stats['injected_429']})")
    print(f"limit: final {limiter.limit}, max {max(limits)}, decreases {limiter.core.decreases}")

    t0 = trace[0][0] if trace else 0.0
    limit_line = [(t - t0, float(limit)) for t, limit, _ in trace]
    flight_line = [(t - t0, float(flying)) for t, _, flying in trace]
    # in flight first, so the limit is drawn on top of it
    path = write_png(args.png, line_plot([flight_line, limit_line], colors=[(255, 127, 14), (31, 119, 180)]))
    y_max = max((y for _, y in limit_line + flight_line), default=0)
    print(f"png: {path} (blue = limit, orange = in flight; x 0..{seconds:.1f} s, y 0..{y_max:.0f})")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=5, help="calls per agent, one after another")
    parser.add_argument("--capacity", type=int, default=256, help="the server's concurrent calls")
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--rate-429", type=float, default=0.0, help="share of calls the server answers 429 anyway")
    parser.add_argument("--concurrency", type=int, default=16, help="the limiter's initial limit")
    parser.add_argument("--png", type=Path, default=DEFAULT_PNG)
    parser.add_argument("--overhead", action="store_true", help="first measure the client's own calls/s ceiling")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
