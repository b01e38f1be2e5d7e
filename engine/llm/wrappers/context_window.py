"""WindowedModel: refuse a call whose prompt would not fit the model's context window, before sending it.

The prompt's tokens are estimated at 4 characters a token (what the simulated LLM counts; a real tokenizer is
close for English text), plus the call's ``max_tokens`` when it asks for a reply that long. A refused call raises
:class:`~engine.errors.LLMCallError`, so the metering around it records it as a failed call and the agent's step
as an ``llm_error``; nothing reaches the provider.
"""

from __future__ import annotations

import math
from typing import Any

from engine.errors import LLMCallError
from engine.llm.prefix import prompt_print
from engine.llm.protocol import ChatModel, ChatResult

__all__ = ["CHARS_PER_TOKEN", "WindowedModel", "estimate_tokens"]

CHARS_PER_TOKEN = 4


def estimate_tokens(messages: list[dict[str, Any]]) -> int:
    """The prompt's tokens, estimated from its characters."""
    return math.ceil(sum(chars for _, chars in prompt_print(messages)) / CHARS_PER_TOKEN)


class WindowedModel:
    """``inner``, refusing prompts longer than ``window`` tokens (with the reply's ``max_tokens``)."""

    def __init__(self, inner: ChatModel, window: int, *, max_tokens: int | None = None) -> None:
        self._inner = inner
        self.window = window
        self._max_tokens = max_tokens

    async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        prompt = estimate_tokens(messages)
        reply = int(kwargs.get("max_tokens") or self._max_tokens or 0)
        if prompt + reply > self.window:
            asked = f" and {reply} to answer" if reply else ""
            raise LLMCallError(f"not sent: the prompt is about {prompt} tokens{asked}, over the model's context window "
                               f"of {self.window} (llm.<role>.context_window)")
        return await self._inner.complete(messages, **kwargs)
