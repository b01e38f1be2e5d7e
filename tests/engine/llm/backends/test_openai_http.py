"""The aiohttp transport against real servers on 127.0.0.1: the simulated LLM, and a few odd ones."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import logging
import socket
import subprocess
import sys
import types
import warnings
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from engine.errors import LLMCallError, LLMRateLimitError
from engine.llm.backends.openai_http import OpenAIHTTPChatModel, parse_retry_after
from engine.llm.client import LimiterConfig, LLMClient
from engine.llm.dispatcher import get_chat_model
from engine.llm.sim import SimFaults, SimLLM
from engine.llm.sim import server as sim_server
from engine.llm.sim.background import serving, serving_app
from engine.llm.sim.server import create_app
from engine.llm.structured import complete_structured
from engine.llm.wrappers.retry import RetryingModel

SECRET = "sk-polis-test-secret-value"
HI = [{"role": "user", "content": "hi"}]
TOOLS = [{
    "type": "function",
    "function": {"name": "vote", "parameters": {"type": "object", "properties": {"choice": {"enum": ["stay", "leave"]}},
                                                "required": ["choice"]}},
}]
ROOT = Path(__file__).resolve().parents[4]


class Vote(BaseModel):
    choice: str
    confidence: float


def _model(url: str, model: str = "openai/sim", **fields: Any) -> OpenAIHTTPChatModel:
    return OpenAIHTTPChatModel(LLMClient(model=model, base_url=f"{url}/v1", **fields))


def _completion(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-odd", "object": "chat.completion", "created": 1, "model": "odd",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
    }


class PeerCounter:
    """ASGI middleware that remembers the client address of every request: one address, one connection."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.peers: set[tuple[str, int]] = set()
        self.requests = 0

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].endswith("/chat/completions"):
            self.peers.add(tuple(scope["client"]))
            self.requests += 1
        await self.app(scope, receive, send)


def odd_app() -> FastAPI:
    """Servers that behave in ways the simulated LLM does not."""
    app = FastAPI()

    @app.post("/echo-auth/v1/chat/completions")
    async def echo_auth(request: Request) -> JSONResponse:
        # a careless proxy that puts the request's credentials into its error
        auth = request.headers.get("authorization", "")
        return JSONResponse({"error": {"message": f"invalid credentials: {auth}", "type": "auth"}}, status_code=401)

    @app.post("/whoami/v1/chat/completions")
    async def whoami(request: Request) -> JSONResponse:
        body = await request.json()
        return JSONResponse(_completion(json.dumps({"auth": request.headers.get("authorization"), "body": body})))

    @app.post("/no-choices/v1/chat/completions")
    async def no_choices() -> JSONResponse:
        return JSONResponse({"id": "chatcmpl-odd", "object": "chat.completion", "usage": {}})

    @app.post("/remaining/v1/chat/completions")
    async def remaining() -> JSONResponse:
        return JSONResponse(_completion("ok"), headers={"x-ratelimit-remaining-requests": "42"})

    return app


@pytest.fixture(scope="module")
def sim_url() -> Iterator[str]:
    with serving() as url:
        yield url


@pytest.fixture(scope="module")
def odd_url() -> Iterator[str]:
    with serving_app(odd_app()) as url:
        yield url


# ---- answers -----------------------------------------------------------------------------------
async def test_structured_output_through_the_dispatcher_over_http(sim_url, monkeypatch):
    monkeypatch.setenv("POLIS_TEST_KEY", SECRET)
    client = LLMClient(model="openai/sim-default", base_url=f"{sim_url}/v1", api_key_env="POLIS_TEST_KEY")

    vote = await complete_structured(get_chat_model(client), HI, Vote)

    assert isinstance(vote, Vote)


async def test_tool_calls_come_back_openai_shaped(sim_url):
    result = await _model(sim_url).complete(HI, tools=TOOLS)

    assert result.finish_reason == "tool_calls" and result.text is None
    (call,) = result.tool_calls
    assert call["type"] == "function" and call["function"]["name"] == "vote" and call["id"]
    assert json.loads(call["function"]["arguments"])["choice"] in {"stay", "leave"}


async def test_result_carries_tokens_latency_and_the_clients_model_string(sim_url):
    result = await _model(sim_url, "openai/sim").complete(HI)

    assert result.text and result.finish_reason == "stop"
    assert result.model == "openai/sim"
    assert result.input_tokens > 0 and result.output_tokens > 0 and result.latency_ms > 0
    assert result.rate_limit_remaining is None  # the simulated LLM sends no such header


async def test_result_carries_the_served_model_and_fingerprint_the_server_named_beside_the_requested_one():
    with serving(SimLLM(seed=1, served_model="sim-2026-11-30", fingerprint="fp_abc")) as url:
        result = await _model(url, "openai/sim").complete(HI)

    assert result.model == "openai/sim"
    assert (result.served_model, result.system_fingerprint) == ("sim-2026-11-30", "fp_abc")


async def test_request_body_has_the_bare_model_name_options_and_format_and_the_key_read_at_call_time(odd_url, monkeypatch):
    model = OpenAIHTTPChatModel(LLMClient(
        model="openai/gpt-x", base_url=f"{odd_url}/whoami/v1", api_key_env="POLIS_TEST_KEY", options={"temperature": 0.25}
    ))
    response_format = {"type": "json_object"}

    monkeypatch.setenv("POLIS_TEST_KEY", "sk-first")
    first = json.loads((await model.complete(HI, response_format=response_format, tools=TOOLS)).text or "")
    monkeypatch.setenv("POLIS_TEST_KEY", "sk-second")
    second = json.loads((await model.complete(HI)).text or "")

    assert first["auth"] == "Bearer sk-first" and second["auth"] == "Bearer sk-second"
    assert first["body"] == {"model": "gpt-x", "messages": HI, "temperature": 0.25, "response_format": response_format, "tools": TOOLS}
    assert second["body"] == {"model": "gpt-x", "messages": HI, "temperature": 0.25}


async def test_a_base_url_without_a_key_variable_sends_the_placeholder_key(odd_url):
    result = await OpenAIHTTPChatModel(LLMClient(model="openai/m", base_url=f"{odd_url}/whoami/v1")).complete(HI)

    assert json.loads(result.text or "")["auth"] == "Bearer sk-no-key"


async def test_rate_limit_remaining_header_is_read(odd_url):
    result = await OpenAIHTTPChatModel(LLMClient(model="openai/m", base_url=f"{odd_url}/remaining/v1")).complete(HI)

    assert result.rate_limit_remaining == 42


async def test_known_models_are_priced_from_litellms_map_and_the_sim_is_not(sim_url):
    priced = await _model(sim_url, "openai/gpt-4o-mini").complete(HI)
    unpriced = await _model(sim_url, "openai/sim").complete(HI)

    assert priced.cost_usd is not None and priced.cost_usd > 0
    assert unpriced.cost_usd is None


# ---- errors ------------------------------------------------------------------------------------
async def test_429_is_a_rate_limit_error_with_retry_after_and_no_secret(monkeypatch):
    monkeypatch.setenv("POLIS_TEST_KEY", SECRET)
    with serving(faults=SimFaults(rate_429=1.0, retry_after_s=3)) as url:
        with pytest.raises(LLMRateLimitError) as caught:
            await _model(url, api_key_env="POLIS_TEST_KEY").complete(HI)

    assert caught.value.status == 429
    assert caught.value.retry_after == 3
    assert SECRET not in str(caught.value)


def test_retry_after_is_read_from_milliseconds_seconds_or_an_http_date():
    in_ten = format_datetime(datetime.now(UTC) + timedelta(seconds=10), usegmt=True)

    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({"retry-after": "2"}) == 2
    assert 8 <= (parse_retry_after({"retry-after": in_ten}) or 0) <= 10
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None


async def test_500s_are_retried_by_retrying_model_then_surface_with_their_status():
    with serving(faults=SimFaults(rate_500=1.0)) as url:
        model = RetryingModel(_model(url), max_attempts=3, base_delay=0.01)
        with pytest.raises(LLMCallError) as caught:
            await model.complete(HI)
        stats = httpx.get(f"{url}/stats").json()

    assert caught.value.status == 500
    assert "simulated server error" in str(caught.value)
    assert stats["outcomes"]["injected_500"] == 3


async def test_a_malformed_body_is_a_retryable_call_error():
    with serving(faults=SimFaults(rate_malformed=1.0)) as url:
        with pytest.raises(LLMCallError) as caught:
            await _model(url).complete(HI)

    assert caught.value.status is None and not isinstance(caught.value, LLMRateLimitError)
    assert "unusable body" in str(caught.value)


async def test_retrying_model_gets_past_occasional_malformed_bodies():
    with serving(faults=SimFaults(rate_malformed=0.5, seed=3)) as url:
        model = RetryingModel(_model(url), max_attempts=10, base_delay=0.001)
        results = [await model.complete([{"role": "user", "content": f"call {i}"}]) for i in range(10)]
        stats = httpx.get(f"{url}/stats").json()

    assert all(result.text for result in results)
    assert stats["outcomes"]["malformed"] > 0


async def test_a_body_without_choices_is_a_retryable_call_error(odd_url):
    with pytest.raises(LLMCallError, match="unusable body") as caught:
        await OpenAIHTTPChatModel(LLMClient(model="openai/m", base_url=f"{odd_url}/no-choices/v1")).complete(HI)

    assert caught.value.status is None


async def test_missing_key_variable_is_a_clear_error(sim_url, monkeypatch):
    monkeypatch.delenv("POLIS_ABSENT_KEY", raising=False)

    with pytest.raises(LLMCallError, match="POLIS_ABSENT_KEY"):
        await _model(sim_url, api_key_env="POLIS_ABSENT_KEY").complete(HI)


async def test_a_key_echoed_into_an_error_body_is_scrubbed(odd_url, monkeypatch):
    monkeypatch.setenv("POLIS_TEST_KEY", SECRET)
    model = OpenAIHTTPChatModel(LLMClient(model="openai/m", base_url=f"{odd_url}/echo-auth/v1", api_key_env="POLIS_TEST_KEY"))

    with pytest.raises(LLMCallError) as caught:
        await model.complete(HI)

    assert caught.value.status == 401
    assert SECRET not in str(caught.value) and SECRET[:12] not in str(caught.value)
    assert "invalid credentials: Bearer ***" in str(caught.value)


async def test_connection_refused_is_a_retryable_call_error():
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]

    with pytest.raises(LLMCallError) as caught:
        await _model(f"http://127.0.0.1:{port}").complete(HI)

    assert caught.value.status is None


async def test_a_hung_request_times_out_as_a_retryable_call_error():
    with serving(faults=SimFaults(rate_hang=1.0)) as url:  # a hang of an hour: an error at all is the timeout's
        with pytest.raises(LLMCallError) as caught:
            await asyncio.wait_for(_model(url, limits=LimiterConfig(timeout_s=0.3)).complete(HI), 120)  # bounds a hang

    assert caught.value.status is None


# ---- the connection pool -----------------------------------------------------------------------
async def test_sequential_calls_reuse_one_keep_alive_connection():
    counter = PeerCounter(create_app(SimLLM(seed=1), SimFaults()))
    with serving_app(counter) as url:
        model = _model(url)
        for i in range(50):
            await model.complete([{"role": "user", "content": f"call {i}"}])

    assert counter.requests == 50
    assert len(counter.peers) == 1


async def test_200_concurrent_tasks_all_get_answers_on_at_most_200_connections(monkeypatch: pytest.MonkeyPatch):
    # The first round's latency lasts until all 200 calls are in (not a fixed 50 ms, which a busy machine can spend
    # before the last caller starts, letting it reuse a connection): so the first round is concurrent on any machine.
    counter, real_sleep = PeerCounter(create_app(SimLLM(seed=1), SimFaults(latency_ms=50))), asyncio.sleep

    async def held(seconds: float, result: Any = None) -> Any:
        while counter.requests < 200:
            await real_sleep(0.01)
        return await real_sleep(seconds, result)

    monkeypatch.setattr(sim_server, "asyncio", types.SimpleNamespace(**{**vars(asyncio), "sleep": held}))
    with serving_app(counter) as url:
        model = _model(url)

        async def caller(i: int) -> list[str | None]:
            return [(await model.complete([{"role": "user", "content": f"task {i} call {k}"}])).text for k in range(3)]

        answers = await asyncio.wait_for(asyncio.gather(*(caller(i) for i in range(200))), 150)  # bounds a hang

    assert all(text for texts in answers for text in texts)
    assert counter.requests == 600
    assert 100 < len(counter.peers) <= 200  # no pool cap below the callers, and later rounds reuse


async def test_a_connection_the_server_closed_for_idleness_is_not_an_error():
    # uvicorn closes idle connections after its keep-alive (5 s by default; 1 s here)
    counter, servers = PeerCounter(create_app(SimLLM(seed=1), SimFaults())), list[uvicorn.Server]()
    with serving_app(counter, keep_alive_s=1, servers=servers) as url:
        model = _model(url)
        await model.complete(HI)
        async with asyncio.timeout(120):  # until the server has closed it (1 s on, or later on a busy machine)
            while servers[0].server_state.connections:
                await asyncio.sleep(0.05)
        result = await model.complete(HI)

    assert result.text
    assert len(counter.peers) == 2


@contextlib.asynccontextmanager
async def dropping_server(drop_from: int) -> AsyncIterator[tuple[str, dict[str, int]]]:
    """A raw HTTP/1.1 server that answers each connection's first ``drop_from - 1`` requests, then
    reads the next one and closes the connection without a word (a keep-alive race, every time)."""
    seen = {"connections": 0, "answered": 0, "dropped": 0}
    answer = json.dumps(_completion("ok")).encode()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen["connections"] += 1
        try:
            for number in range(1, 1000):
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")
                )
                await reader.readexactly(length)
                if number >= drop_from:
                    seen["dropped"] += 1
                    return
                writer.write(
                    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: keep-alive\r\n"
                    + f"Content-Length: {len(answer)}\r\n\r\n".encode() + answer
                )
                await writer.drain()
                seen["answered"] += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            return
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", seen
    finally:
        server.close()
        await server.wait_closed()


async def test_a_reused_connection_dropped_by_the_server_is_retried_once_on_a_new_one():
    async with dropping_server(drop_from=2) as (url, seen):
        model = _model(url)
        results = [await model.complete(HI) for _ in range(5)]

    assert [result.text for result in results] == ["ok"] * 5
    # each later call went out on the pooled connection, was dropped, and was re-sent on a new one
    assert seen == {"connections": 5, "answered": 5, "dropped": 4}


async def test_a_fresh_connection_dropped_by_the_server_is_an_error_not_a_silent_retry():
    async with dropping_server(drop_from=1) as (url, seen):
        with pytest.raises(LLMCallError) as caught:
            await _model(url).complete(HI)

    assert caught.value.status is None
    assert "ServerDisconnectedError" in str(caught.value)
    assert seen["connections"] == 1


def test_each_event_loop_gets_its_own_session_closed_with_its_loop(sim_url, caplog):
    model = _model(sim_url)

    async def call() -> str | None:
        return (await model.complete(HI)).text

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with caplog.at_level(logging.ERROR, logger="asyncio"):
            first = asyncio.run(call())
            second = asyncio.run(call())
            gc.collect()

    assert first and second == first
    assert not [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert not [r for r in caplog.records if "Unclosed" in r.getMessage()]


def test_the_transport_never_imports_litellm_and_reads_its_prices_before_the_first_call(sim_url):
    script = f"""
import asyncio, sys
import engine.llm.backends.openai_http
assert "litellm" not in sys.modules, "importing the transport imported litellm"
from engine.llm.client import LLMClient
from engine.llm.dispatcher import get_chat_model
from engine.llm.prices import price_map
model = get_chat_model(LLMClient(model="openai/gpt-4o-mini", base_url="{sim_url}/v1"))
# the price map is parsed as the stack is built, not on the event loop at the first answer
assert price_map.cache_info().currsize == 1, "the price map waits for the first answer"
result = asyncio.run(model.complete([{{"role": "user", "content": "hi"}}]))
assert result.text and result.cost_usd, result
print("litellm" in sys.modules)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
