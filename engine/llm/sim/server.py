"""The simulated LLM's HTTP face: an OpenAI-compatible ASGI app with injected faults.

A thin shell: ``SimLLM`` decides every answer and ``FaultPlan`` decides every call's fate; this
module only routes, parses bodies, keeps the in-flight count and acts the draws out (sleep, 429,
500, hang, malformed body).

It is a bare ASGI callable, not a FastAPI app: a FastAPI app's middleware stack cost about
0.4 ms of CPU per call here, two thirds of the server's 0.6 ms, and on a 2-core machine the
server shares the cores with the client it serves. Measured 2026-12-02 on one quiet 2-core
machine, 1,000 callers held at 256 in flight against capacity 256 x 200 ms: the FastAPI app
used 0.60 ms of CPU per call; this app's figure is in ``benchmarks/llm_saturation.py``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn

from engine.llm.gc_policy import relax_gc
from engine.llm.sim.faults import FaultPlan, SimFaults
from engine.llm.sim.model import CREATED, SimLLM, request_kind, validate_request

__all__ = ["ServerStats", "SimApp", "create_app", "run_server"]

#: Sent with status 200 and ``application/json`` when a malformed answer is injected.
MALFORMED_BODY = b'{"id": "chatcmpl-sim", "object": "chat.completion", "choices": [{"message": {"content": "'
_KINDS = ("json_schema", "json_object", "tools", "text", "embeddings")
_OUTCOMES = ("ok", "rejected_capacity", "injected_429", "injected_500", "hang", "malformed", "bad_request")
_DEFAULT_EMBED_DIM = 64

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


class ServerStats:
    """Call counters and the in-flight gauge of one app."""

    def __init__(self) -> None:
        self.calls: dict[str, int] = dict.fromkeys(_KINDS, 0)
        self.outcomes: dict[str, int] = dict.fromkeys(_OUTCOMES, 0)
        self.in_flight = 0
        self.max_in_flight = 0

    def enter(self) -> None:
        """Count a call that was admitted."""
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def leave(self) -> None:
        """Count an admitted call that finished (however it finished)."""
        self.in_flight -= 1

    def as_dict(self) -> dict[str, Any]:
        """The JSON ``/stats`` returns."""
        return {
            "calls": dict(self.calls),
            "outcomes": dict(self.outcomes),
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
        }


class _Reply:
    """One HTTP answer: status, body bytes, extra headers."""

    __slots__ = ("body", "headers", "status")

    def __init__(self, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.status, self.body, self.headers = status, body, headers or {}

    @classmethod
    def json(cls, payload: Any, status: int = 200, headers: dict[str, str] | None = None) -> _Reply:
        return cls(status, json.dumps(payload, ensure_ascii=False, separators=(",", ":")).encode(), headers)

    async def send(self, send: Send) -> None:
        headers = [(b"content-type", b"application/json"), (b"content-length", str(len(self.body)).encode())]
        headers += [(name.lower().encode(), value.encode()) for name, value in self.headers.items()]
        await send({"type": "http.response.start", "status": self.status, "headers": headers})
        await send({"type": "http.response.body", "body": self.body})


class SimApp:
    """The ASGI app around one simulated model.

    Routes: ``POST /v1/chat/completions`` and ``/v1/embeddings``, ``GET /v1/models`` (each also
    without ``/v1``), ``GET /health`` and ``GET /stats``; anything else answers 404 (405 for a
    known path with another method).

    Args:
        sim: answers every call.
        faults: latency, capacity and injected failures.
    """

    def __init__(self, sim: SimLLM, faults: SimFaults) -> None:
        self.sim, self.faults, self.stats = sim, faults, ServerStats()
        self._plan = FaultPlan(faults)
        calls: dict[str, tuple[Callable[[dict], str], Callable[[dict], dict]]] = {
            "/chat/completions": (_chat_kind, sim.complete),
            "/embeddings": (_embedding_kind, lambda body: _embeddings(sim, body)),
        }
        reads: dict[str, Callable[[], Any]] = {
            "/models": lambda: {
                "object": "list",
                "data": [{"id": sim.name, "object": "model", "created": CREATED, "owned_by": "polis-sim"}],
            },
        }
        self._post = {prefix + path: route for path, route in calls.items() for prefix in ("/v1", "")}
        self._get = {prefix + path: read for path, read in reads.items() for prefix in ("/v1", "")}
        self._get["/health"] = lambda: {"status": "ok"}
        self._get["/stats"] = self.stats.as_dict

    async def __call__(self, scope: dict[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path, method = scope["path"], scope["method"]
        if method == "POST" and path in self._post:
            body = await _read_body(receive)
            if body is not None:
                await (await self._serve(body, *self._post[path], receive)).send(send)
        elif method == "GET" and path in self._get:
            await _Reply.json(self._get[path]()).send(send)
        elif path in self._post or path in self._get:
            allow = "POST" if path in self._post else "GET"
            await _Reply.json({"detail": "Method Not Allowed"}, 405, {"Allow": allow}).send(send)
        else:
            await _Reply.json({"detail": "Not Found"}, 404).send(send)

    async def _serve(
        self, raw: bytes, kind_of: Callable[[dict], str], answer: Callable[[dict], dict], receive: Receive
    ) -> _Reply:
        stats, faults = self.stats, self.faults
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError("request body must be a JSON object")
            kind = kind_of(body)
        except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
            stats.outcomes["bad_request"] += 1
            return _error(400, f"invalid request: {exc}", "invalid_request_error", "invalid_request")
        stats.calls[kind] += 1
        if faults.capacity is not None and stats.in_flight >= faults.capacity:
            stats.outcomes["rejected_capacity"] += 1
            return _rate_limited(f"simulated capacity of {faults.capacity} concurrent requests reached", faults)
        draw = self._plan.draw()
        if draw.outcome == "429":
            stats.outcomes["injected_429"] += 1
            return _rate_limited("simulated rate limit", faults)
        stats.enter()
        try:
            if draw.outcome == "hang":
                stats.outcomes["hang"] += 1
                await _hang(receive, faults.hang_s)
                return _error(504, "simulated hang ended without an answer", "timeout", "timeout")
            await asyncio.sleep(draw.latency_s)
            if draw.outcome == "500":
                stats.outcomes["injected_500"] += 1
                return _error(500, "simulated server error", "server_error", "internal_error")
            if draw.outcome == "malformed":
                stats.outcomes["malformed"] += 1
                return _Reply(200, MALFORMED_BODY)
            try:
                payload = answer(body)
            except ValueError as exc:
                stats.outcomes["bad_request"] += 1
                return _error(400, f"invalid request: {exc}", "invalid_request_error", "invalid_request")
            stats.outcomes["ok"] += 1
            return _Reply.json(payload)
        finally:
            stats.leave()


def create_app(sim: SimLLM, faults: SimFaults) -> SimApp:
    """Build the OpenAI-compatible ASGI app around one simulated model (see :class:`SimApp`)."""
    return SimApp(sim, faults)


def run_server(
    host: str = "127.0.0.1",
    port: int = 8000,
    *,
    name: str = "default",
    seed: int = 0,
    faults: SimFaults | None = None,
    served_model: str | None = None,
    fingerprint: str | None = None,
) -> None:
    """Serve a simulated model over HTTP until interrupted.

    Args:
        host: interface to bind; keep it on loopback unless you mean it.
        port: TCP port.
        name: the model name (and part of its seed).
        seed: the answers' seed.
        faults: injected faults; none by default.
        served_model: the model id every reply names (None: the requested one).
        fingerprint: the replies' ``system_fingerprint`` (None: ``sim-<seed>``).
    """
    sim = SimLLM(name=name, seed=seed, served_model=served_model, fingerprint=fingerprint)
    app = create_app(sim, faults or SimFaults())
    relax_gc()  # hundreds of requests in flight, as in a client (engine.llm.gc_policy)
    # keep-alive longer than clients' idle pools, so a pooled connection is never closed under them
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_keep_alive=60, proxy_headers=False)


def _chat_kind(body: dict) -> str:
    validate_request(body)
    return request_kind(body)


def _embedding_kind(body: dict) -> str:
    texts = body.get("input")
    if isinstance(texts, str):
        texts = [texts]
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise ValueError("'input' must be a string or a non-empty array of strings (token arrays are not supported)")
    dim = body.get("dimensions", _DEFAULT_EMBED_DIM)
    if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
        raise ValueError("'dimensions' must be a positive integer")
    return "embeddings"


def _embeddings(sim: SimLLM, body: dict) -> dict[str, Any]:
    texts = [body["input"]] if isinstance(body["input"], str) else body["input"]
    vectors = sim.embed(texts, dim=body.get("dimensions", _DEFAULT_EMBED_DIM))
    tokens = sum(max(1, -(-len(t) // 4)) for t in texts)
    return {
        "object": "list",
        "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)],
        "model": body.get("model") or sim.name,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }


def _error(status: int, message: str, kind: str, code: str, headers: dict[str, str] | None = None) -> _Reply:
    return _Reply.json({"error": {"message": message, "type": kind, "param": None, "code": code}}, status, headers)


def _rate_limited(message: str, faults: SimFaults) -> _Reply:
    seconds = faults.retry_after_s
    headers = {
        "Retry-After": str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}",
        "retry-after-ms": str(round(seconds * 1000)),
    }
    return _error(429, message, "rate_limit_error", "rate_limit_exceeded", headers)


async def _read_body(receive: Receive) -> bytes | None:
    """The request's whole body; None when the client went away first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _hang(receive: Receive, seconds: float) -> None:
    """Sleep ``seconds``, or until the client goes away (so abandoned hangs do not pile up)."""
    sleeper = asyncio.ensure_future(asyncio.sleep(seconds))
    gone = asyncio.ensure_future(_disconnected(receive))
    try:
        await asyncio.wait({sleeper, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleeper.cancel()
        gone.cancel()


async def _disconnected(receive: Receive) -> None:
    while (await receive())["type"] != "http.disconnect":
        await asyncio.sleep(0.05)  # a server that re-sends empty bodies must not make this spin
