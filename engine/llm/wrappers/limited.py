"""LimitedModel: hold an AdaptiveSemaphore slot for each call and tell it how the call went.

Wrap it inside ``RetryingModel`` (``RetryingModel(LimitedModel(base, limiter))``): each attempt
takes its own slot, and a backoff sleep between attempts holds none.
"""

from __future__ import annotations

import time
from typing import Any

from engine.errors import LLMRateLimitError
from engine.llm.protocol import ChatModel, ChatResult
from engine.llm.wrappers.limiter import AdaptiveSemaphore

__all__ = ["LimitedModel"]


class LimitedModel:
    """A ChatModel that keeps at most ``limiter.limit`` calls to ``inner`` in flight.

    A success and a 429 are reported with their latency, a success also with the provider's
    ``x-ratelimit-remaining-requests`` where it sent one; any other failure (or a cancellation)
    frees the slot without teaching the limiter anything. Retry-After is ``RetryingModel``'s.

    Args:
        inner: the model to call.
        limiter: the process's limiter for this client (shared by every caller of it).
    """

    def __init__(self, inner: ChatModel, limiter: AdaptiveSemaphore) -> None:
        self._inner = inner
        self.limiter = limiter

    async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        async with self.limiter.slot() as slot:
            started = time.perf_counter()
            try:
                result = await self._inner.complete(messages, **kwargs)
            except LLMRateLimitError:
                slot.record(time.perf_counter() - started, rate_limited=True)
                raise
            slot.record(time.perf_counter() - started, rate_limited=False, remaining=result.rate_limit_remaining)
            return result
