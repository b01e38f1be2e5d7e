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
    options: dict[str, Any] | None = None,
    prompt: str | None = None,
    response_format: dict[str, Any] | None = None,
    tools: list[dict[str, Any]] | None = None,
    **request: Any,
) -> str:
    """A sha256 hex digest of the canonical JSON of everything that shapes the answer.

    Args:
        model: the client's model string.
        seed: the experiment seed.
        messages: the chat messages.
        options: the client's request options.
        prompt: the template's ``name@hash``; not part of the key (two templates that render the
            same messages ask the same question).
        response_format: as for ``ChatModel.complete``.
        tools: as for ``ChatModel.complete``.
        **request: any further ``complete`` parameter; each one shapes the answer, so each is keyed.
    """
    del prompt
    # response_format and tools stay in the payload even when None: keys of earlier answers still match
    payload = {
        "model": model,
        "seed": seed,
        "messages": messages,
        "response_format": response_format,
        "tools": tools,
        "options": options or {},
        **{k: v for k, v in request.items() if v is not None},
    }
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()
