"""The shape of an OpenAI-style chat completion, checked before anything is taken from it.

Both transports (:mod:`engine.llm.backends.openai_http`, :mod:`engine.llm.backends.litellm_backend`) read a reply
through :func:`parse_completion`. A reply of the wrong shape (no ``choices``, an empty list, a
``message`` that is no object, ``content`` that is a number, ``usage`` that is garbage) raises
:class:`MalformedCompletionError`, which each transport turns into an ``LLMCallError`` with status
None: retried like any transient failure, then recorded as an ``llm_calls`` error row. Nothing of
a malformed reply is ever passed on as if it were an answer.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["Completion", "MalformedCompletionError", "parse_completion"]


class MalformedCompletionError(ValueError):
    """A reply that is not a usable chat completion; the message says which part is wrong."""


@dataclass(frozen=True)
class Completion:
    """What a transport takes from a well-formed reply (its first choice and the usage)."""

    content: str | None
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    finish_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    model: str | None = None  #: the reply's ``model``: the id of the model that served it
    system_fingerprint: str | None = None  #: the reply's ``system_fingerprint``


def _type(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _tokens(usage: dict[str, Any], name: str) -> int:
    value = usage.get(name)
    if value is None:
        return 0
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise MalformedCompletionError(f"usage.{name} is {value!r}, not a count of tokens")
    return value


def parse_completion(payload: Any) -> Completion:
    """Check a decoded chat completion and take its first choice and usage.

    Args:
        payload: the decoded JSON body (or litellm's response as a dict).

    Returns:
        The first choice's content, tool calls and finish reason, and the token counts (0 when
        the reply reports none).

    Raises:
        MalformedCompletionError: the payload is not a chat completion of the expected shape.
    """
    if not isinstance(payload, dict):
        raise MalformedCompletionError(f"the body is a JSON {_type(payload)}, not an object")
    choices = payload.get("choices")
    if not isinstance(choices, list):
        raise MalformedCompletionError(f"choices is {_type(choices)}, not a list" if "choices" in payload else "no choices")
    if not choices:
        raise MalformedCompletionError("choices is an empty list")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise MalformedCompletionError(f"choices[0] is {_type(choice)}, not an object")
    message = choice.get("message")
    if not isinstance(message, dict):
        raise MalformedCompletionError(f"choices[0].message is {_type(message)}, not an object")
    content = message.get("content")
    if content is not None and not isinstance(content, str):
        raise MalformedCompletionError(f"choices[0].message.content is {_type(content)}, not a string or null")
    tool_calls = message.get("tool_calls")
    if tool_calls is None:
        tool_calls = []
    if not isinstance(tool_calls, list) or not all(isinstance(call, dict) for call in tool_calls):
        raise MalformedCompletionError("choices[0].message.tool_calls is not a list of objects")
    finish_reason = choice.get("finish_reason")
    if finish_reason is not None and not isinstance(finish_reason, str):
        raise MalformedCompletionError(f"choices[0].finish_reason is {_type(finish_reason)}, not a string or null")
    usage = payload.get("usage")
    if usage is None:
        usage = {}
    if not isinstance(usage, dict):
        raise MalformedCompletionError(f"usage is {_type(usage)}, not an object")
    return Completion(
        content=content,
        tool_calls=list(tool_calls),
        finish_reason=finish_reason,
        input_tokens=_tokens(usage, "prompt_tokens"),
        output_tokens=_tokens(usage, "completion_tokens"),
        model=_text(payload, "model"),
        system_fingerprint=_text(payload, "system_fingerprint"),
    )


def _text(payload: dict[str, Any], name: str) -> str | None:
    """A top-level string field, or None (these describe the reply; a bad one does not spoil its content)."""
    value = payload.get(name)
    return value if isinstance(value, str) and value else None
