"""TracedModel: one ``llm.completion`` span per call, around any ChatModel."""

from __future__ import annotations

from typing import Any

from engine.llm.protocol import ChatModel, ChatResult
from engine.trace import TraceRecorder

__all__ = ["TracedModel"]


class TracedModel:
    """Record each call as a span in ``recorder`` (parented to the span open in the caller).

    Args:
        inner: the model.
        recorder: where spans go.
    """

    def __init__(self, inner: ChatModel, recorder: TraceRecorder) -> None:
        self._inner = inner
        self._recorder = recorder

    async def complete(self, messages: list[dict[str, Any]], *, prompt: str | None = None, **kwargs: Any) -> ChatResult:
        with self._recorder.span("llm.completion", prompt=prompt) as span:
            result = await self._inner.complete(messages, prompt=prompt, **kwargs)
            span.set(model=result.model, input_tokens=result.input_tokens, output_tokens=result.output_tokens)
            return result
