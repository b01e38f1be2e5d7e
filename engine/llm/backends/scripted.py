"""ScriptedModel: a ChatModel that replays fixed answers (a shipped fake for tests and notebooks)."""

from __future__ import annotations

import json
from typing import Any

from engine.llm.protocol import ChatResult

__all__ = ["ScriptedModel"]


class ScriptedModel:
    """Answer each call with the next scripted reply; records every request it saw.

    Args:
        replies: texts (or JSON-able objects, dumped) returned in order.
    """

    def __init__(self, replies: list[Any]) -> None:
        self._replies = [r if isinstance(r, str) else json.dumps(r) for r in replies]
        self.requests: list[dict[str, Any]] = []

    async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        self.requests.append({"messages": messages, **kwargs})
        if not self._replies:
            raise AssertionError("ScriptedModel ran out of replies")
        text = self._replies.pop(0)
        return ChatResult(text=text, model="scripted", input_tokens=1, output_tokens=1)
