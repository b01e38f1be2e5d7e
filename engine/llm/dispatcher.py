"""Per-process dispatch: one backend per (client, process), built lazily, living across tasks.

A batch task asks for a client's model; the first ask in a worker process builds it, later
batches and ticks reuse it. ``dispatcher_stats`` counts builds so tests can check that.
"""

from __future__ import annotations

import os
from collections import Counter

from engine.llm.client import LLMClient
from engine.llm.protocol import ChatModel
from engine.llm.retry import RetryingModel

__all__ = ["dispatcher_stats", "get_chat_model"]

_MODELS: dict[str, ChatModel] = {}
_BUILDS: Counter[str] = Counter()


def _build(client: LLMClient) -> ChatModel:
    if client.is_sim:
        from engine.llm.sim_backend import SimChatModel

        return SimChatModel(name=client.model.removeprefix("sim/"), seed=client.seed)
    from engine.llm.litellm_backend import LiteLLMChatModel

    return RetryingModel(LiteLLMChatModel(client))


def get_chat_model(client: LLMClient) -> ChatModel:
    """The process-wide model for ``client`` (built on first use)."""
    key = client.cache_key()
    model = _MODELS.get(key)
    if model is None:
        model = _MODELS[key] = _build(client)
        _BUILDS[key] += 1
    return model


def dispatcher_stats() -> dict[str, int]:
    """How many backends this process built, and its pid."""
    return {"pid": os.getpid(), "builds": sum(_BUILDS.values()), "clients": len(_MODELS)}
