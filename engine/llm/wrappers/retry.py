"""RetryingModel: exponential backoff that honours Retry-After, wrapped around any ChatModel.

Per-request timeouts are :class:`engine.llm.wrappers.timeout.TimeoutModel`'s job (inside the limiter).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from engine.errors import LLMCallError
from engine.llm.protocol import ChatModel, ChatResult

__all__ = ["RetryingModel"]

_TRANSIENT = {None, 408, 409, 429, 500, 502, 503, 504}


class RetryingModel:
    """Retry transient failures; after ``max_attempts`` the last error propagates.

    Args:
        inner: the model to call.
        max_attempts: tries in all (at least 1).
        base_delay: first backoff in seconds, doubled each try, with jitter.
        max_delay: cap on one backoff.
    """

    def __init__(
        self,
        inner: ChatModel,
        *,
        max_attempts: int = 4,
        base_delay: float = 0.5,
        max_delay: float = 20.0,
    ) -> None:
        self._inner = inner
        self._max_attempts = max(1, max_attempts)
        self._base_delay = base_delay
        self._max_delay = max_delay

    async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        for attempt in range(1, self._max_attempts + 1):
            try:
                return await self._inner.complete(messages, **kwargs)
            except LLMCallError as error:
                if error.status not in _TRANSIENT or attempt == self._max_attempts:
                    raise
                # decided here, so the error (its traceback holds this frame: a cycle only the
                # garbage collector could free) is gone before the sleep
                delay = min(self._max_delay, self._base_delay * 2 ** (attempt - 1)) * (0.5 + random.random())
                if error.retry_after is not None:
                    delay = max(delay, error.retry_after)
            await asyncio.sleep(delay)
        raise AssertionError("unreachable")
