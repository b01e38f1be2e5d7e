"""Malformed replies from a real server on 127.0.0.1: each is a retried LLMCallError and an llm_calls error row.

Through both transports (the dispatcher's aiohttp stack, and litellm), wrapped in MeteredModel as
agents and routers wrap them; and one whole run whose LLM answers ``{"choices": []}`` to one agent.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from engine.errors import LLMCallError
from engine.llm.backends.completion_body import MalformedCompletionError, parse_completion
from engine.llm.backends.litellm_backend import LiteLLMChatModel
from engine.llm.client import LLMClient
from engine.llm.dispatcher import get_chat_model
from engine.llm.meter import Meter, MeteredModel
from engine.llm.sim import SimFaults, SimLLM
from engine.llm.sim.background import serving_app
from engine.llm.sim.server import create_app
from engine.llm.wrappers.retry import RetryingModel
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader

HI = [{"role": "user", "content": "hi"}]
_GOOD_CHOICE = {"index": 0, "message": {"role": "assistant", "content": "fine"}, "finish_reason": "stop"}

#: name -> the body a broken server answers with status 200.
MALFORMED: dict[str, Any] = {
    "empty-choices": {"id": "x", "choices": []},
    "no-choices": {"id": "x", "usage": {}},
    "choices-not-a-list": {"choices": {"0": _GOOD_CHOICE}},
    "choice-not-an-object": {"choices": ["fine"]},
    "no-message": {"choices": [{"index": 0, "finish_reason": "stop"}]},
    "message-a-string": {"choices": [{"index": 0, "message": "fine"}]},
    "content-a-number": {"choices": [{"index": 0, "message": {"role": "assistant", "content": 42}}]},
    "tool-calls-not-a-list": {"choices": [{"index": 0, "message": {"role": "assistant", "content": None, "tool_calls": "vote"}}]},
    "usage-a-string": {"choices": [_GOOD_CHOICE], "usage": "lots"},
    "usage-tokens-garbage": {"choices": [_GOOD_CHOICE], "usage": {"prompt_tokens": "many", "completion_tokens": -1}},
    "body-a-list": [_GOOD_CHOICE],
    "not-json": "{not json",
}


class BrokenLLM:
    """ASGI app: ``/<kind>/v1/chat/completions`` answers 200 with ``MALFORMED[kind]`` and counts the hits.

    Everything else goes to ``inner`` (the simulated LLM), except a chat call whose body contains
    ``poison``: that one gets ``{"choices": []}``.
    """

    def __init__(self, inner: Any = None, poison: str | None = None) -> None:
        self.inner, self.poison = inner, poison
        self.hits: Counter[str] = Counter()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            if self.inner is not None:
                await self.inner(scope, receive, send)
            return
        chunks, more = [], True
        while more:
            message = await receive()
            chunks.append(message.get("body", b""))
            more = message.get("more_body", False)
        body = b"".join(chunks)
        kind = scope["path"].strip("/").split("/")[0]
        if kind in MALFORMED:
            self.hits[kind] += 1
            payload = MALFORMED[kind]
            await _respond(send, payload.encode() if isinstance(payload, str) else json.dumps(payload).encode())
            return
        if self.poison is not None and scope["path"].endswith("/chat/completions") and self.poison.encode() in body:
            self.hits["poisoned"] += 1
            await _respond(send, json.dumps({"id": "x", "object": "chat.completion", "choices": []}).encode())
            return
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        await self.inner(scope, replay, send)


async def _respond(send: Any, body: bytes) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
def broken() -> Iterator[tuple[BrokenLLM, str]]:
    app = BrokenLLM()
    with serving_app(app) as url:
        yield app, url


@pytest.mark.parametrize("kind", sorted(k for k in MALFORMED if k != "not-json"))
def test_each_malformed_shape_is_refused_by_the_shape_check(kind: str) -> None:
    with pytest.raises(MalformedCompletionError):
        parse_completion(MALFORMED[kind])
    assert parse_completion({"choices": [_GOOD_CHOICE], "usage": {"prompt_tokens": 3.0}}).input_tokens == 3


async def test_every_malformed_reply_is_retried_then_an_error_row_through_the_dispatchers_stack(broken) -> None:
    app, url = broken
    meter = Meter()

    async def call(kind: str) -> BaseException | None:
        model = MeteredModel(get_chat_model(LLMClient(model="openai/broken", base_url=f"{url}/{kind}/v1")), meter, caller="agent:1")
        try:
            await model.complete(HI, prompt="probe@abc")
        except LLMCallError as error:
            return error
        return None

    # concurrently: each kind waits through the stack's own backoff (about 3.5 s for 4 attempts)
    errors = dict(zip(MALFORMED, await asyncio.gather(*(call(kind) for kind in MALFORMED)), strict=True))

    for kind, error in errors.items():
        assert isinstance(error, LLMCallError) and error.status is None, (kind, error)
        assert "unusable body" in str(error), (kind, error)
        assert app.hits[kind] == 4, (kind, app.hits[kind])  # RetryingModel's 4 attempts, like any transient failure
    assert len(meter.records) == len(MALFORMED) and meter.failures == len(MALFORMED)
    rows = {}
    for kind in MALFORMED:
        [row] = [r for r in meter.records if f"/{kind}/v1/" in (r.error or "")]
        assert row.status == "error" and row.caller == "agent:1" and row.prompt_name == "probe", row
        rows[kind] = row
    assert "choices is an empty list" in rows["empty-choices"].error
    assert "content is int, not a string or null" in rows["content-a-number"].error
    assert "usage is str, not an object" in rows["usage-a-string"].error


@pytest.mark.parametrize("kind", ["empty-choices", "content-a-number", "no-message", "usage-a-string"])
async def test_litellm_turns_malformed_replies_into_retried_call_errors(broken, kind: str) -> None:
    app, url = broken
    before = app.hits[kind]
    meter = Meter()
    inner = RetryingModel(LiteLLMChatModel(LLMClient(model="openai/broken", base_url=f"{url}/{kind}/v1")),
                          max_attempts=3, base_delay=0.01)
    with pytest.raises(LLMCallError):
        await MeteredModel(inner, meter, caller="router", role="coder").complete(HI)
    assert app.hits[kind] - before == 3  # retried, not an IndexError on the first answer
    assert [r.status for r in meter.records] == ["error"]


async def test_a_run_whose_llm_answers_empty_choices_to_one_agent_ends_honestly_with_error_rows(shell, tmp_path) -> None:
    app = BrokenLLM(create_app(SimLLM(name="half-broken", seed=4), SimFaults()), poison="Mallory")
    with serving_app(app) as url:
        spec = parse_spec({
            "name": "empty-choices",
            "llm": {"default": {"model": "openai/sim", "base_url": f"{url}/v1"}},
            "agents": [{"id": i, "profile": {"name": name}, "config": {"max_react_turns": 1, "tools": ["finish"]}}
                       for i, name in enumerate(["Alice", "Bob", "Carol", "Mallory"])],
            "environment": {"router": "react", "modules": [{"type": "MessagingSpace"}]},
            "steps": [{"type": "run", "num_steps": 1, "tick": 600}],
            "max_error_rate": 0.5,
        })
        summary = await run_experiment(spec, tmp_path / "run", shell)

    assert summary.status == "completed_with_errors", summary.error
    assert app.hits["poisoned"] >= 4  # Mallory's call, tried four times
    with ReplayReader(tmp_path / "run") as reader:
        actions = {r["agent_id"]: r for r in reader.query("SELECT agent_id, status, error FROM actions").to_pylist()}
        calls = reader.query("SELECT agent_id, status, error FROM llm_calls WHERE caller LIKE 'agent:%'").to_pylist()
    assert actions[3]["status"] == "llm_error" and "choices is an empty list" in actions[3]["error"]
    assert {actions[i]["status"] for i in range(3)} == {"finished"}
    failed = [c for c in calls if c["status"] == "error"]
    assert failed and {c["agent_id"] for c in failed} == {3}
    assert all("choices is an empty list" in c["error"] for c in failed)
    assert {c["agent_id"] for c in calls if c["status"] == "ok"} == {0, 1, 2}


async def test_a_questionnaire_whose_every_reply_is_malformed_ends_failed_with_each_answer_an_error(shell, tmp_path) -> None:
    from engine.cli_output import exit_code

    with serving_app(create_app(SimLLM(name="all-malformed", seed=5), SimFaults(rate_malformed=1.0))) as url:
        spec = parse_spec({
            "name": "all-malformed",
            "llm": {"default": {"model": "openai/sim", "base_url": f"{url}/v1"}},
            "llm_check": False,  # what the run makes of the replies, not the preflight's refusal
            "agents": [{"id": i, "profile": {"name": f"A{i}"}} for i in range(3)],
            "steps": [{"type": "questionnaire", "questionnaire_id": "mood", "questions": [
                {"id": "happy", "prompt": "How happy are you?", "response_type": "integer", "min": 1, "max": 5},
                {"id": "why", "prompt": "Why?"},
            ]}],
        })
        summary = await run_experiment(spec, tmp_path / "run", shell)

    assert summary.status == "failed" and exit_code(summary.status) == 1
    assert summary.errors == 6  # 3 agents x 2 questions, each without a value; no agent-step ran
    assert "6 of 6 questionnaire answers have no valid value" in summary.error
    assert summary.first_error.startswith("questionnaire mood (step 0), agent 0, happy: ")
    with ReplayReader(tmp_path / "run") as reader:
        rows = reader.query("SELECT parse_success, value_int, error FROM questionnaire_answers").to_pylist()
    assert len(rows) == 6 and not any(r["parse_success"] or r["value_int"] is not None for r in rows)
    assert all(r["error"] for r in rows)
