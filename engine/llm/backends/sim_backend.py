"""The simulated LLM called in-process through the ChatModel interface (no litellm, no HTTP)."""

from __future__ import annotations

import time
from typing import Any

from engine.llm.meter import serving_agent, serving_run
from engine.llm.protocol import ChatResult
from engine.llm.sim.model import SimLLM
from engine.llm.sim.rehearsal import REHEARSAL, rehearse

__all__ = ["SimChatModel"]


class SimChatModel:
    """ChatModel over an in-process :class:`SimLLM` (model strings ``sim/<kind>[:<label>]``).

    Args:
        name: the simulated model's name (the part after ``sim/``: a kind and an optional ``:label``); ``rehearsal`` answers a survey's target
            items from the real answers (:mod:`engine.llm.sim.rehearsal`).
        seed: the experiment seed; answers are a function of (seed, request).
        options: the client's request options; the rehearsal reads ``rehearse_noise`` (default 0), ``sim/social``
            reads ``social`` (its action rates).

    Raises:
        ValueError: ``social`` rates that cannot be.
    """

    def __init__(self, name: str, seed: int, options: dict[str, Any] | None = None) -> None:
        self._sim = SimLLM(name=name, seed=seed, social=(options or {}).get("social"))
        self._model = f"sim/{name}"
        self._seed = seed
        rehearsal = name.partition(":")[0] == REHEARSAL  # sim/rehearsal[:label]
        self._noise = float((options or {}).get("rehearse_noise", 0.0)) if rehearsal else None

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        response_format: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        prompt: str | None = None,
    ) -> ChatResult:
        request: dict[str, Any] = {"model": self._model, "messages": messages}
        if response_format is not None:
            request["response_format"] = response_format
        if tools:
            request["tools"] = tools
        started = time.perf_counter()
        body = self._sim.complete(request)
        message = body["choices"][0]["message"]
        usage = body.get("usage", {})
        text = message.get("content")
        if self._noise is not None and response_format is not None:
            schema = (response_format.get("json_schema") or {}).get("schema") or {}
            text = rehearse(text, schema, agent=serving_agent.get(), run=serving_run.get(), noise=self._noise, seed=self._seed)
        return ChatResult(
            text=text,
            model=self._model,
            input_tokens=usage.get("prompt_tokens", 0),
            output_tokens=usage.get("completion_tokens", 0),
            latency_ms=(time.perf_counter() - started) * 1000,
            tool_calls=message.get("tool_calls") or [],
            finish_reason=body["choices"][0].get("finish_reason"),
            served_model=body.get("model"),
            system_fingerprint=body.get("system_fingerprint"),
        )
