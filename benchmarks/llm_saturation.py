"""LLM saturation: 1,000 callers in one process against a simulated LLM with a hard capacity, over HTTP.

The simulated LLM runs in its own process (default: 256 concurrent calls, 200 ms each, so at most
1,280 calls/s; beyond capacity it answers 429 at once, with ``Retry-After: 1``). The callers are
asyncio tasks in this process that call one after another for ``--seconds`` (sustained load, as a
saturated provider sees it; a call counts if it is answered before the deadline) through the
dispatcher's model for an OpenAI-compatible client (``get_chat_model``: ``RetryingModel(
LimitedModel(TimeoutModel(OpenAIHTTPChatModel)))`` under single-flight): the AIMD limiter alone
decides how many are in flight.

Side by side in the same run, against a fresh server, the *oracle*: the same callers through
``RetryingModel`` over ``OpenAIHTTPChatModel`` behind a fixed semaphore of exactly the capacity
(a Retry-After sleep holds no slot, as with the limiter). It knows
what the limiter must find out, so it shows what this machine's two processes can do at that
concurrency (on 2 cores the client and the server each need most of one core near 1,280 calls/s).
Prints:
    calls: <answered> answered, <failed> failed in <s> s
    achieved: <calls/s>; bound: <capacity / latency> calls/s; oracle: <calls/s>
    oracle ratio: <oracle / bound>
    ratio vs oracle: <achieved / oracle>
    429s: <answered 429 by the server, from /stats>
    limit: final <n>, max <n>, decreases <n>
    ratio: <achieved / bound>
and writes a PNG of the limit (blue) and the calls in flight (orange) over time.

Side by side on 2026-12-02 (2-core VM with noisy neighbours: the oracle alone varied 0.59-0.96
between runs), runs alternated between this code and the code before the garbage-collector fix
(fb31f11), defaults:

    before: ratio 0.59, 0.56, 0.47   (oracle ratio 0.80, 0.60, 0.66)
    now:    ratio 0.79, 0.81, 0.78   (oracle ratio 0.83, 0.92, 0.72)
    --rate-429 0.3, before: 0.34 (oracle 0.59); now: 0.63, 0.63 (oracle 0.93, 0.93)

Earlier the same day, quieter: now 0.89, 0.86, 0.85, 0.81, 0.89 (oracle 0.85-0.93), and 0.68 with
``--rate-429 0.3``. What changed: the client process no longer stalls on its garbage collector
(``engine.llm.gc_policy``: full collections of ~150,000 live objects had held the event loop
150-190 ms at a time, 3.6 s of collection in 15 s), a retried error is freed before its backoff
sleep, timeouts run in the caller's task, and ``polis sim-llm`` is a bare ASGI app (0.35 ms of
CPU per call instead of FastAPI's 0.60). The goal (ratio >= 0.9) was not met in any run here
(best 0.89): the limiter reaches 0.89-1.0 of the oracle, the oracle itself 0.6-0.96 of the
bound, and what the limiter loses is mostly the ramp (16 to 256 in about 1.2 s, four doublings
of a round trip and a half each over HTTP, where answers come in waves) and the 429s of its
probes past the capacity.

On 2026-12-02, a quiet stretch (oracle 0.92-0.96), runs alternated between 4d8ee2f (before) and
the limiter that counts as held at a decrease only calls answered within 1.5x the baseline and
tells a quota's 429s only at 0.96 of what the server held (traces had shown calls in transit
counted as held, 376 over a capacity of 256, and a false 0.44 "background" share keeping the
limit above capacity while 100-200 calls failed after 4 attempts):

    before: ratio 0.90, 0.87, 0.89, 0.90, 0.90; failed calls 0, 14, 210, 0, 0
    after:  ratio 0.91, 0.88, 0.88, 0.89, 0.91; failed calls 0, 0, 0, 0, 0
    --rate-429 0.3, before: 0.70, 0.69; after: 0.68, 0.64 (goal >= 0.6)

Then with the price map read as the transport is built (b4fbf05; before, its ~50 ms parse at the
first answer lengthened the first window): ratio 0.86, 0.88, 0.90; failed calls 2, 0, 0 (oracle
0.95-0.96). The goal (>= 0.9) is met in some runs, not all: what is left is the ramp (16 to 512
in about 1.2 s) and a probe past the capacity about once a second, each drawing 100-130 fast 429s.

On a slower VM the next day (oracle 0.94-0.96): ratio 0.87, 0.85, 0.86, 0.90, the limiter at
0.89-0.94 of the oracle; failed calls 51, 0, 11, 1. ``--rate-429 0.3``: 0.59, 0.50, 0.66. The limit
sits at the capacity from about 1.6 s on; the ramp (16 to 256 in about 1.1 s, then one doubling
past it) is what separates it from the oracle, pinned at the capacity from the start.

On 2026-12-03 (oracle 0.94-0.97), runs alternated between d51c6d2 (before) and the limiter that
judges a window by the cohort of calls issued in the window before (docs/limiter.md). Traces had
shown the windows' own 429 shares at 0.47-0.62 during slow start against a 30% quota (fast 429s
come a latency before the answers to calls issued beside them; cohorts read 0.20-0.39), so the
first window (0.62-0.81) passed for churn and each doubling for overload: 2-4 s at a limit of 9-16.

    --rate-429 0.3, before: 0.70, 0.65, 0.69; after: 0.68, 0.78, 0.80 (failed calls 104-185 vs 146-189)
    earlier the same day, before: 0.56, 0.70, 0.73, 0.71, 0.69, 0.52; after: 0.81, 0.82, 0.80
    defaults, before: 0.90, 0.89, 0.90; after: 0.91, 0.89, 0.90 (0 failed but for 2 calls)
    as committed (the window after an unjudged first one also closes once its calls are back):
    --rate-429 0.3: 0.83, 0.83, 0.73 (failed 172-213); defaults: 0.91, 0.90, 0.91 (0 failed)

What is left with a quota: the first share (0.3) is no trusted reference (a 50% share is also a
capacity of 8 under a first limit of 16), so it is an alarm whose test at a lower limit takes
1-1.5 s; and the doubling past capacity (256 to 512) is judged a window late, its 429s sending
a few hundred callers into 1 s Retry-After sleeps.

The same scenario in simulated time (``tests/engine/llm/wrappers/limiter_world.py``, no CPU cost) reaches
0.95 of the bound in 15 s (0.92 in 10 s, 0.96 in 20 s); with the 429 background, 16 seeds of 15 s:
before the cohorts mean 0.84 (least 0.73), after 0.85 (least 0.80).

``--overhead`` first measures the client's own ceiling against a zero-latency, unlimited server
(64 callers, 5 s each, one after another in one run): the aiohttp transport's calls/s, bare
litellm's, and raw httpx POSTs/s, then also prints the ratio against ``min(bound, transport
ceiling)``. One run on 2026-12-01, 2 cores shared with neighbours (load average about 2), before
``httptools``/``uvloop`` were dependencies:

    client ceiling (zero-latency sim, 64 callers): aiohttp transport 1575 calls/s, litellm 68 calls/s,
        raw httpx 54 calls/s

(An earlier run at load average 1.2 measured 1898 / 84 / 74 calls/s.) On a quiet machine the
transport ceiling was 778 calls/s with uvicorn's pure-Python parser and 1,499 with httptools and
uvloop, the same run otherwise: the ceiling there is the server's.

Usage: python benchmarks/llm_saturation.py [--agents 1000] [--seconds 15] [--capacity 256]
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
from engine.llm.backends.openai_http import OpenAIHTTPChatModel  # noqa: E402
from engine.llm.client import LimiterConfig, LLMClient  # noqa: E402
from engine.llm.dispatcher import get_chat_model, limiter_for  # noqa: E402
from engine.llm.gc_policy import relax_gc  # noqa: E402
from engine.llm.protocol import ChatModel  # noqa: E402
from engine.llm.sim import SimFaults  # noqa: E402
from engine.llm.sim.server import run_server  # noqa: E402
from engine.llm.wrappers.retry import RetryingModel  # noqa: E402

DEFAULT_PNG = Path(__file__).resolve().parent / "out" / "llm_saturation.png"


def serve(port: int, faults: SimFaults) -> None:
    """The child process: ``polis sim-llm``'s own server (keep-alive 60 s, longer than the client pool's 4 s)."""
    run_server("127.0.0.1", port, name="bench", seed=1, faults=faults)


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


class PinnedModel:
    """The oracle: ``inner`` behind a fixed semaphore of exactly the server's capacity.

    It knows what the limiter must find out, so its calls/s, measured in the same run, are what
    this machine's two processes can do at that concurrency: the yardstick for the limiter.
    """

    def __init__(self, inner: ChatModel, limit: int) -> None:
        self._inner = inner
        self._slots = asyncio.Semaphore(limit)

    async def complete(self, messages: list[dict[str, object]], **kwargs: object) -> object:
        async with self._slots:
            return await self._inner.complete(messages, **kwargs)


async def drive(model: ChatModel, agents: int, seconds: float) -> tuple[int, Counter[str]]:
    """``agents`` callers call one after another for ``seconds``; return (answered in time, failures by kind).

    Sustained load, as a saturated provider sees it: a call counts if it is answered before the
    deadline; the calls in flight then are cancelled and count for nothing.
    """
    ok = 0
    failed: Counter[str] = Counter()
    end = time.perf_counter() + seconds

    async def agent(i: int) -> None:
        nonlocal ok
        k = 0
        while time.perf_counter() < end:
            try:
                await model.complete([{"role": "user", "content": f"agent {i}, call {k}: say something"}])
                ok += time.perf_counter() <= end
            except LLMCallError as error:
                failed[f"{type(error).__name__}({error.status})"] += 1
            except Exception as error:  # noqa: BLE001 - a benchmark counts what escapes the stack, by type
                failed[f"unwrapped {type(error).__module__}.{type(error).__name__}"] += 1
            k += 1

    tasks = [asyncio.create_task(agent(i)) for i in range(agents)]
    await asyncio.wait(tasks, timeout=seconds)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return ok, failed


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
    from engine.llm.backends.litellm_backend import LiteLLMChatModel
    from engine.llm.backends.openai_http import OpenAIHTTPChatModel

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
    relax_gc()  # what the dispatcher's stack does on first use; done first so the oracle runs under it too
    ceiling = None
    if args.overhead:
        ceilings = await client_ceilings()
        figures = ", ".join(f"{name} {value:.0f} calls/s" for name, value in ceilings.items())
        print(f"client ceiling (zero-latency sim, 64 callers): {figures}")
        ceiling = ceilings["aiohttp transport"]  # the dispatcher's transport for this client
    faults = SimFaults(latency_ms=args.latency_ms, capacity=args.capacity, rate_429=args.rate_429, seed=1)
    bound = args.capacity / (args.latency_ms / 1000)
    print(
        f"agents: {args.agents}, calling for {args.seconds:g} s; server: capacity {args.capacity}, "
        f"latency {args.latency_ms:g} ms, rate_429 {args.rate_429:g}; initial limit {args.concurrency}"
    )
    with sim_server(faults) as url:
        client = LLMClient(model="openai/bench", base_url=url + "/v1")
        oracle = RetryingModel(PinnedModel(OpenAIHTTPChatModel(client), args.capacity))  # sleeps hold no slot, as with the limiter
        oracle_ok, _ = await drive(oracle, args.agents, args.seconds)
    oracle_rate = oracle_ok / args.seconds
    with sim_server(faults) as url:
        client = LLMClient(model="openai/bench", base_url=url + "/v1", limits=LimiterConfig(concurrency=args.concurrency))
        model = get_chat_model(client)
        limiter = limiter_for(client)
        assert limiter is not None
        trace: list[tuple[float, int, int]] = []
        sampler = asyncio.create_task(sample(limiter, trace))
        ok, failed = await drive(model, args.agents, args.seconds)
        sampler.cancel()
        stats = httpx.get(url + "/stats").json()["outcomes"]
    seconds = args.seconds
    achieved = ok / seconds
    rejected = stats["rejected_capacity"] + stats["injected_429"]
    limits = [limit for _, limit in limiter.history]
    kinds = ", ".join(f"{n} {kind}" for kind, n in failed.most_common())
    print(f"calls: {ok} answered, {failed.total()} failed in {seconds:g} s" + (f" ({kinds})" if kinds else ""))
    print(f"achieved: {achieved:.1f} calls/s; bound: {bound:.0f} calls/s; oracle: {oracle_rate:.1f} calls/s")
    print(f"oracle ratio: {oracle_rate / bound:.2f} (what this machine does at the capacity, a limit pinned there)")
    print(f"ratio vs oracle: {achieved / oracle_rate:.2f}")
    if ceiling is not None:
        effective = min(bound, ceiling)
        print(f"ratio vs min(bound, transport ceiling) = {effective:.0f} calls/s: {achieved / effective:.2f}")
    print(f"429s: {rejected} (over capacity {stats['rejected_capacity']}, injected {stats['injected_429']})")
    print(f"limit: final {limiter.limit}, max {max(limits)}, decreases {limiter.core.decreases}")
    print(f"ratio: {achieved / bound:.2f}")

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
    parser.add_argument("--seconds", type=float, default=15.0, help="how long the callers keep calling")
    parser.add_argument("--capacity", type=int, default=256, help="the server's concurrent calls")
    parser.add_argument("--latency-ms", type=float, default=200.0)
    parser.add_argument("--rate-429", type=float, default=0.0, help="share of calls the server answers 429 anyway")
    parser.add_argument("--concurrency", type=int, default=16, help="the limiter's initial limit")
    parser.add_argument("--png", type=Path, default=DEFAULT_PNG)
    parser.add_argument("--overhead", action="store_true", help="first measure the client's own calls/s ceiling")
    return parser.parse_args()


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
