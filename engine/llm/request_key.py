"""The identity of an LLM request: model + normalised request + seed (cache and single-flight key)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

__all__ = ["request_key"]


def request_key(
    model: str,
    seed: int,
    messages: list[dict[str, Any]],
    *,
    response_format: dict[str, Any] | None = None,
    tools: list[dict[str, Any]] | None = None,
    options: dict[str, Any] | None = None,
) -> str:
    """A sha256 hex digest of the canonical JSON of everything that shapes the answer.

    The prompt template's name is not part of the key: two templates that render the same
    messages ask the same question.
    """
    payload = {
        "model": model,
        "seed": seed,
        "messages": messages,
        "response_format": response_format,
        "tools": tools,
        "options": options or {},
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
