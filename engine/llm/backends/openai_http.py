"""OpenAIHTTPChatModel: OpenAI-compatible chat completions over aiohttp, without litellm.

The dispatcher uses it for every client with a ``base_url`` and every ``openai/*`` model; other
providers stay on litellm. One keep-alive pool (an ``aiohttp.ClientSession``) serves each event
loop of a process: a session is bound to the loop it was made on, so a Dask worker's loop and
each ``asyncio.run`` get their own, and a loop's session is closed when that loop shuts down.

Client ceilings measured with ``benchmarks/llm_saturation.py --overhead`` on 2026-12-01: one
client process, 64 callers, the simulated LLM at zero latency in its own process, 2 cores shared
with neighbours (load average about 2). One run, calls/s side by side:

    this transport (aiohttp)   1,575 calls/s
    litellm (openai/ path)        68 calls/s
    raw httpx POSTs               54 calls/s

(An earlier run at load average 1.2: 1,898 / 84 / 74.) The same run's default part, 1,000
callers through the dispatcher's stack against a server of capacity 256 at 200 ms (bound 1,280
calls/s), achieved 369 calls/s; through litellm it could not have passed litellm's 68.

Importing this module does not import litellm; prices come from :mod:`engine.llm.prices`.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import os
import time
import weakref
from collections.abc import AsyncIterator, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp

from engine.errors import LLMCallError, LLMRateLimitError
from engine.llm.api_key import resolve_api_key, scrub
from engine.llm.backends.completion_body import parse_completion
from engine.llm.client import LLMClient
from engine.llm.prices import cost_usd, price_map
from engine.llm.protocol import ChatResult

__all__ = ["KEEPALIVE_S", "OPENAI_BASE_URL", "OpenAIHTTPChatModel", "parse_retry_after"]

#: Where ``openai/*`` models without a ``base_url`` go.
OPENAI_BASE_URL = "https://api.openai.com/v1"
#: How long an idle pooled connection is kept. Just under the 5 s idle limit of uvicorn's and
#: llama.cpp's servers, so most idle closes happen on our side; the rest (the server closes as we
#: send) are retried once on a fresh connection.
KEEPALIVE_S = 4.0
#: How much of an error body goes into the error message.
_EXCERPT_CHARS = 300


class OpenAIHTTPChatModel:
    """One OpenAI-compatible endpoint for one client, over this process's pooled connections.

    Args:
        client: the connection settings; without ``base_url`` the model must be ``openai/*``
            and goes to :data:`OPENAI_BASE_URL`.
    """

    def __init__(self, client: LLMClient) -> None:
        self._client = client
        self._url = (client.base_url or OPENAI_BASE_URL).rstrip("/") + "/chat/completions"
        self._model = client.model.removeprefix("openai/")
        # the per-request cap for the transport used alone; the dispatcher's TimeoutModel has the same one
        self._timeout = aiohttp.ClientTimeout(total=client.limits.timeout_s)
        # parsed now (~50 ms, once per process), not at the first answer: there it held the event
        # loop, and with it every answer then due, one round trip into a cold limiter's first window
        price_map()

    def _api_key(self) -> str | None:
        key = resolve_api_key(self._client)
        if key is None and self._client.base_url is None:
            # what litellm did for ``openai/*`` without a named variable: the SDK's own default
            key = os.environ.get("OPENAI_API_KEY")
        return key

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        response_format: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        prompt: str | None = None,
    ) -> ChatResult:
        key = self._api_key()
        body: dict[str, Any] = {"model": self._model, "messages": messages, **self._client.options}
        if response_format is not None:
            body["response_format"] = response_format
        if tools:
            body["tools"] = tools
        headers = {"Content-Type": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        started = time.perf_counter()
        reply = await self._post(json.dumps(body).encode(), headers, key)
        latency_ms = (time.perf_counter() - started) * 1000
        if reply.status == 429:
            raise LLMRateLimitError(
                self._describe(reply, key), status=429, retry_after=parse_retry_after(reply.headers)
            )
        if not 200 <= reply.status < 300:
            raise LLMCallError(self._describe(reply, key), status=reply.status)
        return self._result(reply, key, latency_ms)

    async def _post(self, data: bytes, headers: dict[str, str], key: str | None) -> _Reply:
        session = await _session()
        for attempt in (1, 2):
            sent = _Reuse()
            token = _ATTEMPT.set(sent)
            try:
                async with session.post(
                    self._url, data=data, headers=headers, timeout=self._timeout, allow_redirects=False
                ) as response:
                    return _Reply(response.status, response.headers, await response.read())
            except (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError) as error:
                # A pooled connection the server closed while we sent on it: try once more on a new one.
                if attempt == 1 and sent.reused and not isinstance(error, aiohttp.ClientConnectorError):
                    continue
                raise self._connection_error(error, key) from None
            except (aiohttp.ClientError, TimeoutError) as error:
                raise self._connection_error(error, key) from None
            finally:
                _ATTEMPT.reset(token)
        raise AssertionError("unreachable")

    def _connection_error(self, error: BaseException, key: str | None) -> LLMCallError:
        reason = str(error) or "no answer in time"  # aiohttp's timeouts carry no text
        return LLMCallError(scrub(f"{self._client.model} at {self._url}: {type(error).__name__}: {reason}", key))

    def _describe(self, reply: _Reply, key: str | None) -> str:
        return f"{self._client.model} at {self._url} answered HTTP {reply.status}: {_excerpt(reply.body, key)}"

    def _result(self, reply: _Reply, key: str | None, latency_ms: float) -> ChatResult:
        try:
            completion = parse_completion(json.loads(reply.body))
        except (ValueError, RecursionError) as error:  # not JSON, or not a chat completion (MalformedCompletionError)
            # status None: a transient failure, RetryingModel tries again
            raise LLMCallError(
                f"{self._describe(reply, key)} (unusable body: {type(error).__name__}: {scrub(str(error), key)})"
            ) from None
        return ChatResult(
            text=completion.content,
            model=self._client.model,
            input_tokens=completion.input_tokens,
            output_tokens=completion.output_tokens,
            latency_ms=latency_ms,
            tool_calls=completion.tool_calls,
            finish_reason=completion.finish_reason,
            served_model=completion.model,
            system_fingerprint=completion.system_fingerprint,
            cost_usd=cost_usd(self._client.model, completion.input_tokens, completion.output_tokens),
            rate_limit_remaining=_int_header(reply.headers, "x-ratelimit-remaining-requests"),
        )


def parse_retry_after(headers: Mapping[str, str]) -> float | None:
    """Seconds to wait from ``retry-after-ms``, else ``Retry-After`` (seconds or an HTTP date).

    Returns:
        Seconds (at least 0); None when neither header is usable.
    """
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


@dataclass(frozen=True, slots=True)
class _Reply:
    status: int
    headers: Mapping[str, str]
    body: bytes


class _Reuse:
    """Told by the pool's connector whether an attempt went out on a connection used before."""

    __slots__ = ("reused",)

    def __init__(self) -> None:
        self.reused = False


def _excerpt(body: bytes, key: str | None) -> str:
    # scrubbed before it is cut, so a key split by the cut cannot leak its first half
    text = " ".join(scrub(body.decode("utf-8", errors="replace"), key).split())
    if not text:
        return "(empty body)"
    return text if len(text) <= _EXCERPT_CHARS else text[:_EXCERPT_CHARS] + "..."


def _int_header(headers: Mapping[str, str], name: str) -> int | None:
    value = headers.get(name)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


# ---- one pool per event loop -------------------------------------------------------------------
#: The attempt in flight in this task; the pool's connector marks it when it hands out a used connection.
_ATTEMPT: ContextVar[_Reuse | None] = ContextVar("polis_openai_http_attempt", default=None)
#: Each loop's session and the async generator that closes it when the loop shuts down.
_SESSIONS: dict[asyncio.AbstractEventLoop, tuple[aiohttp.ClientSession, AsyncIterator[None]]] = {}


class _PoolConnector(aiohttp.TCPConnector):
    """A TCPConnector that tells the current attempt whether its connection served a request before.

    Cheaper than an ``aiohttp.TraceConfig`` hook, which adds about 0.1 ms of CPU to every call.
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._used: weakref.WeakSet[object] = weakref.WeakSet()

    async def connect(self, *args: Any, **kwargs: Any) -> aiohttp.connector.Connection:
        connection = await super().connect(*args, **kwargs)
        protocol, attempt = connection.protocol, _ATTEMPT.get()
        if protocol is not None:
            if attempt is not None:
                attempt.reused = protocol in self._used
            self._used.add(protocol)
        return connection


async def _session() -> aiohttp.ClientSession:
    """This loop's pooled session (made on the loop's first call)."""
    loop = asyncio.get_running_loop()
    entry = _SESSIONS.get(loop)
    if entry is not None and not entry[0].closed:
        return entry[0]
    for stale in [other for other in _SESSIONS if other.is_closed()]:
        del _SESSIONS[stale]  # a loop that closed without shutting its async generators down
    # limit=0: the limiter decides how many calls are in flight; a pool cap would throttle it
    session = aiohttp.ClientSession(connector=_PoolConnector(limit=0, keepalive_timeout=KEEPALIVE_S))
    closer = _close_at_shutdown(loop, session)
    await anext(closer)
    _SESSIONS[loop] = (session, closer)
    return session


async def _close_at_shutdown(loop: asyncio.AbstractEventLoop, session: aiohttp.ClientSession) -> AsyncIterator[None]:
    # A started async generator is closed by ``loop.shutdown_asyncgens()``, which ``asyncio.run``
    # and pytest-asyncio call before closing the loop: the session closes on its own loop.
    try:
        yield
    finally:
        if _SESSIONS.get(loop, (None,))[0] is session:
            del _SESSIONS[loop]
        await session.close()
