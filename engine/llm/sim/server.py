"""The simulated LLM's HTTP face: an OpenAI-compatible FastAPI app with injected faults.

A thin shell: ``SimLLM`` decides every answer and ``FaultPlan`` decides every call's fate; this
module only parses bodies, keeps the in-flight count and acts the draws out (sleep, 429, 500,
hang, malformed body).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response

from engine.llm.sim.faults import FaultPlan, SimFaults
from engine.llm.sim.model import CREATED, SimLLM, request_kind, validate_request

__all__ = ["ServerStats", "create_app", "run_server"]

#: Sent with status 200 and ``application/json`` when a malformed answer is injected.
MALFORMED_BODY = b'{"id": "chatcmpl-sim", "object": "chat.completion", "choices": [{"message": {"content": "'
_KINDS = ("json_schema", "json_object", "tools", "text", "embeddings")
_OUTCOMES = ("ok", "rejected_capacity", "injected_429", "injected_500", "hang", "malformed", "bad_request")
_DEFAULT_EMBED_DIM = 64


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


def create_app(sim: SimLLM, faults: SimFaults) -> FastAPI:
    """Build the OpenAI-compatible app around one simulated model.

    Args:
        sim: answers every call.
        faults: latency, capacity and injected failures.

    Returns:
        A FastAPI app with ``/v1/chat/completions``, ``/v1/embeddings``, ``/v1/models`` (and the
        same without ``/v1``), ``/health`` and ``/stats``.
    """
    app = FastAPI(title="Polis simulated LLM", docs_url=None, redoc_url=None, openapi_url=None)
    plan = FaultPlan(faults)
    stats = ServerStats()
    app.state.sim, app.state.faults, app.state.stats = sim, faults, stats

    async def serve(request: Request, kind_of: Callable[[dict], str], answer: Callable[[dict], dict]) -> Response:
        try:
            body = json.loads(await request.body())
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
        draw = plan.draw()
        if draw.outcome == "429":
            stats.outcomes["injected_429"] += 1
            return _rate_limited("simulated rate limit", faults)
        stats.enter()
        try:
            if draw.outcome == "hang":
                stats.outcomes["hang"] += 1
                await _hang(request, faults.hang_s)
                return _error(504, "simulated hang ended without an answer", "timeout", "timeout")
            await asyncio.sleep(draw.latency_s)
            if draw.outcome == "500":
                stats.outcomes["injected_500"] += 1
                return _error(500, "simulated server error", "server_error", "internal_error")
            if draw.outcome == "malformed":
                stats.outcomes["malformed"] += 1
                return Response(MALFORMED_BODY, media_type="application/json")
            try:
                payload = answer(body)
            except ValueError as exc:
                stats.outcomes["bad_request"] += 1
                return _error(400, f"invalid request: {exc}", "invalid_request_error", "invalid_request")
            stats.outcomes["ok"] += 1
            return JSONResponse(payload)
        finally:
            stats.leave()

    def chat_kind(body: dict) -> str:
        validate_request(body)
        return request_kind(body)

    async def chat_completions(request: Request) -> Response:
        return await serve(request, chat_kind, sim.complete)

    async def embeddings(request: Request) -> Response:
        return await serve(request, _embedding_kind, lambda body: _embeddings(sim, body))

    async def models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [{"id": sim.name, "object": "model", "created": CREATED, "owned_by": "polis-sim"}],
        }

    async def health() -> dict[str, str]:
        return {"status": "ok"}

    async def get_stats() -> dict[str, Any]:
        return stats.as_dict()

    for prefix in ("/v1", ""):
        app.add_api_route(f"{prefix}/chat/completions", chat_completions, methods=["POST"])
        app.add_api_route(f"{prefix}/embeddings", embeddings, methods=["POST"])
        app.add_api_route(f"{prefix}/models", models, methods=["GET"])
    app.add_api_route("/health", health, methods=["GET"])
    app.add_api_route("/stats", get_stats, methods=["GET"])
    return app


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
    # keep-alive longer than clients' idle pools, so a pooled connection is never closed under them
    uvicorn.run(app, host=host, port=port, log_level="warning", timeout_keep_alive=60)


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


def _error(status: int, message: str, kind: str, code: str, headers: dict[str, str] | None = None) -> JSONResponse:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return JSONResponse(body, status_code=status, headers=headers)


def _rate_limited(message: str, faults: SimFaults) -> JSONResponse:
    seconds = faults.retry_after_s
    headers = {
        "Retry-After": str(int(seconds)) if float(seconds).is_integer() else f"{seconds:g}",
        "retry-after-ms": str(round(seconds * 1000)),
    }
    return _error(429, message, "rate_limit_error", "rate_limit_exceeded", headers)


async def _hang(request: Request, seconds: float) -> None:
    """Sleep ``seconds``, or until the client goes away (so abandoned hangs do not pile up)."""
    sleeper = asyncio.ensure_future(asyncio.sleep(seconds))
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({sleeper, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        sleeper.cancel()
        gone.cancel()


async def _disconnected(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        await asyncio.sleep(0.05)  # a server that re-sends empty bodies must not make this spin
