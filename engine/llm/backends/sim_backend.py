"""The simulated LLM called in-process through the ChatModel interface (no litellm, no HTTP)."""

from __future__ import annotations

import time
from typing import Any

from engine.llm.protocol import ChatResult
from engine.llm.sim.model import SimLLM

__all__ = ["SimChatModel"]


class SimChatModel:
    """ChatModel over an in-process :class:`SimLLM` (model strings ``sim/<name>``).

    Args:
        name: the simulated model's name (the part after ``sim/``).
        seed: the experiment seed; answers are a function of (seed, request).
    """

    def __init__(self, name: str, seed: int) -> None:
        self._sim = SimLLM(name=name, seed=seed)
        self._model = f"sim/{name}"

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
        return ChatResult(
            text=message.get("content"),
            model=self._model,
            input_tokens=usage.get("prompt_tokens", 0),
            output_tokens=usage.get("completion_tokens", 0),
            latency_ms=(time.perf_counter() - started) * 1000,
            tool_calls=message.get("tool_calls") or [],
            finish_reason=body["choices"][0].get("finish_reason"),
            served_model=body.get("model"),
            system_fingerprint=body.get("system_fingerprint"),
        )
