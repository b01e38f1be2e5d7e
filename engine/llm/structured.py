"""Structured output: pydantic model -> JSON schema -> validate -> retry with the error fed back.

After ``max_attempts`` invalid answers a :class:`StructuredOutputError` is raised; the caller records
a failure. Nothing is ever invented in place of a valid answer.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from engine.errors import StructuredOutputError
from engine.llm.meter import current_attempt
from engine.llm.prompt import PromptTemplate
from engine.llm.protocol import ChatModel

__all__ = ["FEEDBACK_PROMPT", "complete_structured", "response_format_for"]

T = TypeVar("T", bound=BaseModel)

FEEDBACK_PROMPT = PromptTemplate(
    "structured.feedback",
    "Your previous answer was not valid. Error:\n{error}\n{hint}"
    "Answer again with a single JSON object that follows the schema exactly.",
)


@lru_cache(maxsize=512)
def response_format_for(model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAI ``response_format`` asking for an instance of ``model`` (cached per class)."""
    return {
        "type": "json_schema",
        "json_schema": {"name": model.__name__, "schema": model.model_json_schema(), "strict": True},
    }


async def complete_structured(
    llm: ChatModel,
    messages: list[dict[str, Any]],
    output: type[T],
    *,
    prompt: PromptTemplate | None = None,
    max_attempts: int = 3,
    hint: str = "",
) -> T:
    """Ask ``llm`` for an instance of ``output``.

    Args:
        llm: the model (usually wrapped in retry and metering).
        messages: the conversation.
        output: the pydantic model the answer must validate against.
        prompt: the template that produced ``messages`` (recorded).
        max_attempts: answers to try in all.
        hint: extra text for the feedback message (e.g. the valid tool names).

    Raises:
        StructuredOutputError: no valid answer after ``max_attempts``.
        LLMCallError: the call itself failed after its retries.
    """
    response_format = response_format_for(output)
    conversation = list(messages)
    last_text: str | None = None
    error_text = ""
    for attempt in range(1, max_attempts + 1):
        token = current_attempt.set(attempt)
        try:
            result = await llm.complete(conversation, response_format=response_format, prompt=prompt.id if prompt else None)
        finally:
            current_attempt.reset(token)
        last_text = result.text
        try:
            return output.model_validate_json(last_text or "")
        except ValidationError as error:
            error_text = _describe(error)
        conversation = [
            *conversation,
            {"role": "assistant", "content": last_text or ""},
            {"role": "user", "content": FEEDBACK_PROMPT.render(error=error_text, hint=f"{hint}\n" if hint else "")},
        ]
    raise StructuredOutputError(
        f"no valid {output.__name__} after {max_attempts} attempts: {error_text}",
        attempts=max_attempts,
        last_text=last_text,
    )


def _describe(error: ValidationError) -> str:
    parts = []
    for item in error.errors()[:5]:
        loc = ".".join(str(p) for p in item["loc"]) or "<root>"
        parts.append(f"{loc}: {item['msg']}")
    if not parts:
        return str(error)
    return "; ".join(parts) + ("" if len(error.errors()) <= 5 else f" (+{len(error.errors()) - 5} more)")

