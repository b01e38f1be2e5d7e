"""How much of a prompt repeats the start of the same caller's previous prompt: what a server's prefix cache
(vLLM's, SGLang's) could reuse instead of computing again.

A prompt's print is one ``(hash, characters)`` pair per message (its role and content). The shared prefix is the
characters of the leading messages both prompts have alike, so it is a lower bound on what a cache reuses: a cache
also reuses the start of the first message that differs. Characters stand for tokens (the simulated LLM counts
4 characters a token; for a real tokenizer the share is close). A print is small enough to keep in an agent's
``AGENT.json`` and an archetype group's row from tick to tick.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

__all__ = ["PromptPrint", "prompt_print", "shared_prefix"]

#: One ``(hash, characters)`` pair per message.
PromptPrint = tuple[tuple[str, int], ...]


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        text = content
    else:
        text = json.dumps(content, sort_keys=True, default=str)
    if message.get("tool_calls"):
        text += json.dumps(message["tool_calls"], sort_keys=True, default=str)
    return text


def prompt_print(messages: Sequence[dict[str, Any]]) -> PromptPrint:
    """The print of ``messages`` (see the module docstring)."""
    found = []
    for message in messages:
        text = _text(message)
        digest = hashlib.blake2b(f"{message.get('role')}\0{text}".encode(), digest_size=8).hexdigest()
        found.append((digest, len(text)))
    return tuple(found)


def shared_prefix(previous: Sequence[Sequence[Any]] | None, current: PromptPrint) -> int | None:
    """Characters of ``current``'s leading messages that ``previous`` has alike (None: no previous prompt)."""
    if previous is None:
        return None
    shared = 0
    for (digest, chars), before in zip(current, previous, strict=False):
        if digest != before[0]:
            break
        shared += chars
    return shared
