"""MeteredModel: counts usage for one consumer (an agent-step, a router) and keeps call records.

A record keeps what the ``llm_calls`` row holds and, for the ``transcripts`` dataset, the messages
sent and the reply, with the provider key scrubbed out of both (and out of the error) as the call
is recorded: no record, wherever it travels, carries the key.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from engine.errors import LLMCallError
from engine.llm.api_key import scrub
from engine.llm.prefix import PromptPrint, prompt_print, shared_prefix
from engine.llm.protocol import ChatModel, ChatResult

__all__ = ["CallRecord", "Meter", "MeteredModel", "call_listener", "current_attempt", "serving_agent", "serving_run"]

#: The structured-output attempt in progress (set by ``complete_structured``), recorded per call.
current_attempt: ContextVar[int] = ContextVar("polis_llm_attempt", default=1)
#: The agent whose step the calls serve (its own calls, and the router's while it serves that
#: agent's ask), recorded per call: an agent-step's chain of calls is then one GROUP BY away.
serving_agent: ContextVar[int | None] = ContextVar("polis_serving_agent", default=None)
#: The run whose agent the calls serve, where a batch sets it (the rehearsal reads it): its location, as text, and the
#: driver's run id (a location reused by another run is another run).
serving_run: ContextVar[tuple[str, str] | None] = ContextVar("polis_serving_run", default=None)
#: Who else hears of each call a :class:`Meter` records, as it is recorded: a batch task's live count
#: (``engine.society.run.live_calls``) sets it around its agents; None (elsewhere): nobody.
call_listener: ContextVar[Callable[[CallRecord], None] | None] = ContextVar("polis_call_listener", default=None)


@dataclass(frozen=True)
class CallRecord:
    """One LLM call, as the ``llm_calls`` replay dataset stores it."""

    caller: str  #: "agent:12" or "router"
    role: str
    prompt_name: str | None
    prompt_hash: str | None
    model: str
    input_tokens: int
    output_tokens: int
    latency_ms: float
    status: str  #: ok | error
    error: str | None = None
    attempt: int = 1  #: structured-output attempt (1 = first answer asked for)
    cached: bool = False  #: served from the response cache
    cost_usd: float | None = None
    agent_id: int | None = None  #: the agent served (``serving_agent``)
    messages: list[dict[str, Any]] = field(default_factory=list, repr=False)  #: the messages sent (transcripts only)
    reply: str | None = field(default=None, repr=False)  #: the reply's text (transcripts only)
    served_model: str | None = None  #: the model id the provider says served it (a cached call: as stored)
    system_fingerprint: str | None = None  #: the provider's ``system_fingerprint``
    prompt_chars: int = 0  #: characters of the messages sent
    prefix_chars: int | None = None  #: of which the caller's previous prompt began alike (:mod:`engine.llm.prefix`; None: untracked)

    def as_row(self) -> dict[str, Any]:
        """The ``llm_calls`` columns of this call (messages and reply go to ``transcripts`` only)."""
        return {name: getattr(self, name) for name in _ROW_FIELDS}


_ROW_FIELDS = (
    "caller", "role", "prompt_name", "prompt_hash", "model", "input_tokens", "output_tokens", "latency_ms",
    "status", "error", "attempt", "cached", "cost_usd", "agent_id", "served_model", "system_fingerprint", "prompt_chars",
    "prefix_chars",
)


@dataclass
class Meter:
    """Running totals plus the records of each call."""

    calls: int = 0  #: logical calls, cached ones included
    provider_calls: int = 0  #: calls that reached the provider
    failures: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    cost_usd: float = 0.0
    records: list[CallRecord] = field(default_factory=list)
    #: track each call's prompt against the caller's previous prompt of the same template (one caller's meter: an
    #: agent's, a group's; a server's prefix cache holds many prefixes, so a memory compaction between two steps
    #: does not push the step's prefix out); the last print per template name, which the owner keeps across ticks
    track_prompts: bool = False
    last_prompts: dict[str, PromptPrint] = field(default_factory=dict)

    def add(self, record: CallRecord) -> None:
        self.calls += 1
        self.provider_calls += not record.cached
        self.cost_usd += record.cost_usd or 0.0
        self.failures += record.status != "ok"
        self.input_tokens += record.input_tokens
        self.output_tokens += record.output_tokens
        self.latency_ms += record.latency_ms
        self.records.append(record)
        if (listener := call_listener.get()) is not None:
            listener(record)


class MeteredModel:
    """Wrap a model so each call lands in ``meter``.

    Args:
        inner: the model.
        meter: where totals and records go.
        caller: who is calling (recorded).
        role: the client role (recorded).
        secret: the provider key, scrubbed from the recorded messages, reply and error (None: no key).
    """

    def __init__(self, inner: ChatModel, meter: Meter, *, caller: str, role: str = "default", secret: str | None = None) -> None:
        self._inner = inner
        self.meter = meter
        self._caller = caller
        self._role = role
        self._secret = secret

    def _sent(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self._secret is None:
            return list(messages)  # the callers build a new list per call and never change a sent message
        return json.loads(scrub(json.dumps(messages, default=str), self._secret))

    def _prompt(self, messages: list[dict[str, Any]], name: str) -> dict[str, Any]:
        """The record's prompt size and shared prefix; the meter remembers this prompt as its template's last."""
        printed = prompt_print(messages)
        chars = sum(n for _, n in printed)
        if not self.meter.track_prompts:
            return {"prompt_chars": chars}
        shared = shared_prefix(self.meter.last_prompts.get(name), printed)
        self.meter.last_prompts[name] = printed
        return {"prompt_chars": chars, "prefix_chars": shared}

    async def complete(self, messages: list[dict[str, Any]], *, prompt: str | None = None, **kwargs: Any) -> ChatResult:
        prompt_name, _, prompt_hash = (prompt or "").partition("@")
        sizes = self._prompt(messages, prompt_name)
        attempt = current_attempt.get()
        started = time.perf_counter()
        try:
            result = await self._inner.complete(messages, prompt=prompt, **kwargs)
        except LLMCallError as error:
            self.meter.add(
                CallRecord(
                    self._caller, self._role, prompt_name or None, prompt_hash or None, "?", 0, 0,
                    (time.perf_counter() - started) * 1000, "error", scrub(str(error), self._secret)[:500], attempt,
                    agent_id=serving_agent.get(), messages=self._sent(messages), **sizes,
                )
            )
            raise
        self.meter.add(
            CallRecord(
                self._caller, self._role, prompt_name or None, prompt_hash or None, result.model,
                result.input_tokens, result.output_tokens, result.latency_ms, "ok", None, attempt,
                result.cached, result.cost_usd, serving_agent.get(), self._sent(messages),
                scrub(result.text, self._secret) if result.text is not None else None,
                served_model=result.served_model, system_fingerprint=result.system_fingerprint, **sizes,
            )
        )
        return result
