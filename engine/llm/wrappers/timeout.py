"""TimeoutModel: a call that takes longer than its limit is cancelled and becomes a failure."""

from __future__ import annotations

import asyncio
from typing import Any

from engine.errors import LLMCallError
from engine.llm.protocol import ChatModel, ChatResult

__all__ = ["TimeoutModel"]


class TimeoutModel:
    """Cancel a hung request after ``timeout`` seconds (sits inside the limiter: queueing for a slot
    does not count against the call's time).

    Args:
        inner: the model.
        timeout: seconds one request may take.
    """

    def __init__(self, inner: ChatModel, timeout: float = 120.0) -> None:
        self._inner = inner
        self._timeout = timeout

    async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        # asyncio.timeout, not wait_for: the call runs in the caller's task, no task of its own per call
        try:
            async with asyncio.timeout(self._timeout):
                return await self._inner.complete(messages, **kwargs)
        except TimeoutError:
            raise LLMCallError(f"LLM call timed out after {self._timeout:g} s (cancelled)") from None
