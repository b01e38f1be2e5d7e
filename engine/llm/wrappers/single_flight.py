"""SingleFlightModel: identical concurrent requests make one call and share its answer."""

from __future__ import annotations

import asyncio
from typing import Any

from engine.llm.protocol import ChatModel, ChatResult
from engine.llm.request_key import request_key

__all__ = ["SingleFlightModel"]


class SingleFlightModel:
    """Collapse concurrent identical requests (same model, request and seed) into one inner call.

    Args:
        inner: the model.
        model: the client's model string (part of the key).
        seed: the experiment seed (part of the key).
        options: the client's request options (part of the key).
    """

    def __init__(self, inner: ChatModel, *, model: str, seed: int, options: dict[str, Any] | None = None) -> None:
        self._inner = inner
        self._model = model
        self._seed = seed
        self._options = options or {}
        self._flights: dict[tuple[int, str], asyncio.Task[ChatResult]] = {}
        self.calls = 0
        self.shared = 0

    async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        loop = asyncio.get_running_loop()
        key = (id(loop), request_key(self._model, self._seed, messages, options=self._options, **kwargs))
        flight = self._flights.get(key)
        if flight is None:
            # The call runs as its own task: a cancelled caller does not cancel the others' answer.
            self.calls += 1
            flight = loop.create_task(self._inner.complete(messages, **kwargs))
            self._flights[key] = flight
            flight.add_done_callback(lambda done: self._land(key, done))
        else:
            self.shared += 1
        return await asyncio.shield(flight)

    def _land(self, key: tuple[int, str], flight: asyncio.Task[ChatResult]) -> None:
        self._flights.pop(key, None)
        if not flight.cancelled():
            # read here, so a failure whose callers were all cancelled meanwhile is not logged
            # as "Task exception was never retrieved" (the callers still awaiting get it as usual)
            flight.exception()
