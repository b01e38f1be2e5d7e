"""ChatModel over litellm: the providers that are not OpenAI-compatible (``anthropic/...``, ``gemini/...``).

The dispatcher sends every ``base_url`` and ``openai/*`` client to
:mod:`engine.llm.backends.openai_http` instead; this class still accepts them. litellm is imported here
only, on first use, with the local price map (its import otherwise tries the network). The key is
read from the worker's environment by the variable's *name* (:mod:`engine.llm.api_key`).
"""

from __future__ import annotations

import os
import time
from typing import Any

from engine.errors import LLMCallError, LLMRateLimitError
from engine.llm.api_key import resolve_api_key, scrub
from engine.llm.backends.completion_body import MalformedCompletionError, parse_completion
from engine.llm.client import LLMClient
from engine.llm.protocol import ChatResult

__all__ = ["LiteLLMChatModel", "import_litellm"]


def import_litellm() -> Any:
    """Import litellm without its network price-map fetch."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


class LiteLLMChatModel:
    """One litellm-backed model for one client.

    Args:
        client: the connection settings; ``base_url`` turns the model into an OpenAI-compatible one.
    """

    def __init__(self, client: LLMClient) -> None:
        self._client = client
        self._litellm = import_litellm()
        model = client.model
        if client.base_url and "/" not in model:
            model = f"openai/{model}"
        self._model = model

    def _api_key(self) -> str | None:
        return resolve_api_key(self._client)

    async def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        response_format: dict[str, Any] | None = None,
        tools: list[dict[str, Any]] | None = None,
        prompt: str | None = None,
    ) -> ChatResult:
        kwargs: dict[str, Any] = dict(self._client.options)
        if response_format is not None:
            kwargs["response_format"] = response_format
        if tools:
            kwargs["tools"] = tools
        if self._client.base_url:
            kwargs["api_base"] = self._client.base_url
        key = self._api_key()
        if key is not None:
            kwargs["api_key"] = key
        started = time.perf_counter()
        try:
            response = await self._litellm.acompletion(
                model=self._model, messages=messages, num_retries=0, **kwargs
            )
        except self._litellm.RateLimitError as error:
            raise LLMRateLimitError(scrub(str(error), key), status=429, retry_after=_retry_after(error)) from None
        except self._litellm.APIError as error:
            raise LLMCallError(scrub(str(error), key), status=getattr(error, "status_code", None)) from None
        except (self._litellm.APIConnectionError, self._litellm.Timeout) as error:
            raise LLMCallError(scrub(str(error), key)) from None
        except Exception as error:  # noqa: BLE001 - any other provider failure (InternalServerError, disconnects, ...)
            status = getattr(error, "status_code", None)
            raise LLMCallError(scrub(f"{type(error).__name__}: {error}", key), status=status) from None
        try:
            # The same shape check as the aiohttp transport: litellm passes ``{"choices": []}`` through.
            completion = parse_completion(_as_dict(response))
        except MalformedCompletionError as error:
            # status None: a transient failure, RetryingModel tries again; then an llm_calls error row
            raise LLMCallError(scrub(f"{self._client.model} answered an unusable reply: {error}", key)) from None
        try:
            cost = float(self._litellm.completion_cost(completion_response=response))
        except Exception:  # noqa: BLE001 - litellm raises assorted types for models without a known price
            cost = None
        return ChatResult(
            text=completion.content,
            model=self._client.model,
            input_tokens=completion.input_tokens,
            output_tokens=completion.output_tokens,
            latency_ms=(time.perf_counter() - started) * 1000,
            tool_calls=completion.tool_calls,
            finish_reason=completion.finish_reason,
            served_model=completion.model,
            system_fingerprint=completion.system_fingerprint,
            cost_usd=cost,
        )


def _as_dict(response: Any) -> Any:
    """litellm's response object as plain JSON-like data (for :func:`parse_completion`)."""
    dump = getattr(response, "model_dump", None)
    if dump is None:
        return response
    return dump(warnings=False)  # a wrongly typed field is parse_completion's to report, not a warning


def _retry_after(error: Exception) -> float | None:
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None) or {}
    value = headers.get("retry-after") if hasattr(headers, "get") else None
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None
