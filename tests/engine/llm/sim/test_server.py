"""The simulated LLM over HTTP: a real uvicorn server on 127.0.0.1, real httpx clients."""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import threading
import time
import types
from collections.abc import Iterator
from typing import Any

import httpx
import jsonschema
import pytest

from engine.llm.sim import SimFaults, SimLLM
from engine.llm.sim import server as sim_server
from engine.llm.sim.background import serving as background_serving

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"choice": {"enum": ["stay", "leave"]}, "reason": {"type": "string"}},
    "required": ["choice", "reason"],
    "additionalProperties": False,
}
TEXT_REQUEST: dict[str, Any] = {"model": "sim/default", "messages": [{"role": "user", "content": "Hello there"}]}


@contextlib.contextmanager
def serving(faults: SimFaults | None = None) -> Iterator[str]:
    """A real uvicorn server on a free loopback port."""
    with background_serving(SimLLM(seed=1), faults) as url:
        yield url


@pytest.fixture
def base_url() -> Iterator[str]:
    with serving() as url:
        yield url


def test_json_schema_request_returns_schema_valid_json(base_url: str) -> None:
    body = {**TEXT_REQUEST, "response_format": {"type": "json_schema", "json_schema": {"name": "d", "schema": SCHEMA}}}
    response = httpx.post(f"{base_url}/v1/chat/completions", json=body)
    assert response.status_code == 200
    payload = response.json()
    jsonschema.validate(json.loads(payload["choices"][0]["message"]["content"]), SCHEMA)
    assert payload == SimLLM(seed=1).complete(body)


def test_unprefixed_routes_models_and_health_answer(base_url: str) -> None:
    tools = [{"type": "function", "function": {"name": "wave", "parameters": {"type": "object"}}}]
    response = httpx.post(f"{base_url}/chat/completions", json={**TEXT_REQUEST, "tools": tools})
    assert response.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "wave"
    assert httpx.get(f"{base_url}/v1/models").json()["data"][0]["id"] == "default"
    assert httpx.get(f"{base_url}/health").json() == {"status": "ok"}


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"{not json", "invalid request"),
        (json.dumps({"model": "m"}).encode(), "messages"),
        (
            json.dumps(
                {
                    **TEXT_REQUEST,
                    "response_format": {
                        "type": "json_schema",
                        "json_schema": {"schema": {"pattern": "x", "type": "string"}},
                    },
                }
            ).encode(),
            "pattern",
        ),
    ],
)
def test_invalid_bodies_get_400_with_a_clear_message(base_url: str, content: bytes, needle: str) -> None:
    response = httpx.post(
        f"{base_url}/v1/chat/completions", content=content, headers={"content-type": "application/json"}
    )
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and needle in error["message"]


async def test_capacity_rejects_excess_concurrent_requests_with_retry_after(monkeypatch: pytest.MonkeyPatch) -> None:
    # The admitted calls' latency lasts until the test releases it (not a fixed 300 ms, which a busy machine can
    # spend before the third request arrives): so all six are concurrent, on any machine.
    release, real_sleep = threading.Event(), asyncio.sleep

    async def held(seconds: float, result: Any = None) -> Any:
        while not release.is_set():
            await real_sleep(0.01)
        return result

    monkeypatch.setattr(sim_server, "asyncio", types.SimpleNamespace(**{**vars(asyncio), "sleep": held}))
    with serving(SimFaults(capacity=2, latency_ms=300, retry_after_s=2)) as url:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:
            calls = [asyncio.ensure_future(client.post("/v1/chat/completions", json=TEXT_REQUEST)) for _ in range(6)]
            async with asyncio.timeout(120):  # only bounds a hang
                while (await client.get("/stats")).json()["calls"]["text"] < 6:
                    await asyncio.sleep(0.02)
            release.set()
            responses = await asyncio.gather(*calls)
            stats = (await client.get("/stats")).json()
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [200, 200, 429, 429, 429, 429]
    rejected = [r for r in responses if r.status_code == 429]
    assert all(r.headers["retry-after"] == "2" for r in rejected)
    assert all(r.json()["error"]["type"] == "rate_limit_error" for r in rejected)
    assert stats["outcomes"]["rejected_capacity"] == len(rejected)
    assert stats["outcomes"]["ok"] == 6 - len(rejected)
    assert stats["calls"]["text"] == 6
    assert stats["max_in_flight"] <= 2 and stats["in_flight"] == 0


def test_injected_429_answers_at_once_with_retry_after() -> None:
    # An hour's latency: a 429 that waited for it would not come within the client's timeout (which only bounds a hang).
    with serving(SimFaults(rate_429=1.0, latency_ms=3_600_000, retry_after_s=0.5)) as url:
        response = httpx.post(f"{url}/v1/chat/completions", json=TEXT_REQUEST, timeout=120)
        assert response.status_code == 429 and response.headers["retry-after"] == "0.5"
        assert httpx.get(f"{url}/stats").json()["outcomes"]["injected_429"] == 1


def test_injected_500_answers_with_an_openai_error_body() -> None:
    with serving(SimFaults(rate_500=1.0)) as url:
        response = httpx.post(f"{url}/v1/chat/completions", json=TEXT_REQUEST)
        assert response.status_code == 500
        assert response.json()["error"]["type"] == "server_error"
        assert httpx.get(f"{url}/stats").json()["outcomes"]["injected_500"] == 1


def test_malformed_answers_are_200_with_a_body_that_is_not_json() -> None:
    with serving(SimFaults(rate_malformed=1.0)) as url:
        response = httpx.post(f"{url}/v1/chat/completions", json=TEXT_REQUEST)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    with pytest.raises(json.JSONDecodeError):
        json.loads(response.content)


def test_hanging_call_times_out_the_client_and_the_server_stays_healthy() -> None:
    with serving(SimFaults(rate_hang=1.0)) as url:
        with httpx.Client(timeout=0.5) as client, pytest.raises(httpx.ReadTimeout):
            client.post(f"{url}/v1/chat/completions", json=TEXT_REQUEST)
        assert httpx.get(f"{url}/health", timeout=60).status_code == 200
        deadline = time.monotonic() + 120  # only bounds a hang
        while (stats := httpx.get(f"{url}/stats").json())["in_flight"] and time.monotonic() < deadline:
            time.sleep(0.05)  # the server notices the client went away and drops the hang
        assert stats["outcomes"]["hang"] == 1 and stats["in_flight"] == 0


def test_embeddings_have_the_openai_shape(base_url: str) -> None:
    response = httpx.post(f"{base_url}/v1/embeddings", json={"model": "emb", "input": ["a river", "a market"]})
    payload = response.json()
    assert payload["object"] == "list" and payload["model"] == "emb"
    assert [d["index"] for d in payload["data"]] == [0, 1]
    for item in payload["data"]:
        assert item["object"] == "embedding" and len(item["embedding"]) == 64
        assert math.isclose(sum(x * x for x in item["embedding"]), 1.0)
    assert payload["usage"]["prompt_tokens"] >= 2
    single = httpx.post(f"{base_url}/embeddings", json={"input": "one text", "dimensions": 8}).json()
    assert len(single["data"]) == 1 and len(single["data"][0]["embedding"]) == 8
    assert httpx.get(f"{base_url}/stats").json()["calls"]["embeddings"] == 2


def test_unknown_paths_answer_404_and_known_ones_405_for_another_method(base_url: str) -> None:
    missing = httpx.post(f"{base_url}/v1/completions", json=TEXT_REQUEST)
    assert missing.status_code == 404 and missing.json() == {"detail": "Not Found"}
    wrong = httpx.get(f"{base_url}/v1/chat/completions")
    assert wrong.status_code == 405 and wrong.headers["allow"] == "POST"
    assert httpx.post(f"{base_url}/health").status_code == 405
    assert httpx.get(f"{base_url}/stats").json()["outcomes"]["bad_request"] == 0  # none of these counted as calls
