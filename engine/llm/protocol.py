"""The narrow LLM boundary: one async method, one result type."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["ChatModel", "ChatResult"]


@dataclass(frozen=True)
class ChatResult:
    """One chat completion."""

    text: str | None  #: the assistant's content (JSON text for structured calls)
    model: str  #: the model that answered
    input_tokens: int = 0
    output_tokens: int = 0
    latency_ms: float = 0.0
    tool_calls: list[dict[str, Any]] = field(default_factory=list)  #: OpenAI-shaped tool calls
    finish_reason: str | None = None
    cached: bool = False  #: served from the response cache (no provider call)
    cost_usd: float | None = None  #: provider price where known
    #: the provider's ``x-ratelimit-remaining-requests`` header, where it sends one (the limiter reads it)
    rate_limit_remaining: int | None = None
    #: the model id the provider says served the call (its ``model`` field; None: it sent none)
    served_model: str | None = None
    #: the provider's ``system_fingerprint`` (None: it sent none)
    system_fingerprint: str | None = None


@runtime_checkable
class ChatModel(Protocol):
    """Anything that answers OpenAI-style chat messages.

    Backends name the parameters they send; wrappers take ``**kwargs`` and pass them on, so a new
    parameter is an edit here and in the backends only.
    """

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        response_format: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        prompt: str | None = None,
    ) -> ChatResult:
        """Answer ``messages``.

        Args:
            messages: OpenAI chat messages.
            response_format: OpenAI ``response_format`` (``json_schema`` for structured output).
            tools: OpenAI tool definitions.
            prompt: ``name@hash`` of the template that produced ``messages`` (for records).

        Raises:
            LLMCallError: the call failed.
        """
        ...
