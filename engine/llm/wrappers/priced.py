"""PricedModel: answers charged at the spec's token prices (``llm.<role>.price``) instead of litellm's price map."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from engine.llm.protocol import ChatModel, ChatResult
from engine.llm_spec import PriceSpec

__all__ = ["PricedModel"]


class PricedModel:
    """Wrap ``inner`` so that every answer's ``cost_usd`` is ``price`` applied to its tokens.

    Args:
        inner: the provider stack.
        price: US dollars per million prompt and completion tokens.
    """

    def __init__(self, inner: ChatModel, price: PriceSpec) -> None:
        self.inner = inner
        self.price = price

    async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        result = await self.inner.complete(messages, **kwargs)
        return replace(result, cost_usd=self.price.cost(result.input_tokens, result.output_tokens))
