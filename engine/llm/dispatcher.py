"""The one place LLM wrapper stacks are built: a process stack per client, a caller stack per caller.

The process stack (:func:`get_chat_model`) is cache over single-flight over retry over limiter
over timeout over the backend. A batch task asks for a client's model; the first ask in a worker
process builds it, later batches and ticks reuse it. ``dispatcher_stats`` counts builds so tests
can check that.

The caller stack (:func:`caller_model`) is what one caller (an agent-step, the env router, the
helper) calls: meter over trace over budget over the process stack, built per caller because each
has its own records, spans and allowance. The meter gets the client's key to scrub from its records. Every wrapper forwards ``complete``'s keyword arguments
as they come, so a new parameter reaches the backend without an edit here.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter

from engine.errors import LLMCallError
from engine.llm.api_key import NO_KEY, resolve_api_key
from engine.llm.budget import BudgetedModel, BudgetGate
from engine.llm.client import LLMClient
from engine.llm.gc_policy import relax_gc
from engine.llm.meter import Meter, MeteredModel
from engine.llm.protocol import ChatModel
from engine.llm.wrappers.cache import CachedModel, ResponseCache
from engine.llm.wrappers.context_window import WindowedModel
from engine.llm.wrappers.limited import LimitedModel
from engine.llm.wrappers.limiter import AdaptiveSemaphore
from engine.llm.wrappers.priced import PricedModel
from engine.llm.wrappers.retry import RetryingModel
from engine.llm.wrappers.single_flight import SingleFlightModel
from engine.llm.wrappers.timeout import TimeoutModel
from engine.llm.wrappers.traced import TracedModel
from engine.trace import TraceRecorder

__all__ = ["caller_model", "dispatcher_stats", "flush_response_caches", "get_chat_model", "limiter_for", "provider_model",
           "refresh_response_caches"]

_MODELS: dict[str, ChatModel] = {}
_BUILDS: Counter[str] = Counter()
_LIMITERS: dict[str, AdaptiveSemaphore] = {}


def _transport(client: LLMClient) -> ChatModel:
    """The provider call itself: aiohttp for OpenAI-compatible endpoints, litellm for the rest."""
    if client.base_url is not None or client.model.startswith("openai/"):
        from engine.llm.backends.openai_http import OpenAIHTTPChatModel

        return OpenAIHTTPChatModel(client)
    from engine.llm.backends.litellm_backend import LiteLLMChatModel

    return LiteLLMChatModel(client)


def _build(client: LLMClient) -> ChatModel:
    relax_gc()  # this process is about to keep many calls in flight (engine.llm.gc_policy)
    if client.is_sim:
        from engine.llm.backends.sim_backend import SimChatModel

        return SimChatModel(name=client.model.removeprefix("sim/"), seed=client.seed, options=client.options)
    # one limiter per client and process, living as long as the cached model; retries outside it,
    # so a backoff sleep holds no slot
    limiter = _LIMITERS[client.cache_key()] = AdaptiveSemaphore(client.limits)
    return RetryingModel(LimitedModel(TimeoutModel(_transport(client), client.limits.timeout_s), limiter))


def provider_model(client: LLMClient) -> ChatModel:
    """The provider alone, retried and timed out: no cache, no limiter, no meter (a preflight's test call).
    Not the process stack: nothing of it is kept."""
    return RetryingModel(TimeoutModel(_transport(client), client.limits.timeout_s))


def _compose(client: LLMClient) -> ChatModel:
    """Cache (if configured) over single-flight over the provider stack of ``_build`` (priced at the spec's price, if any)."""
    built = _build(client) if client.price is None else PricedModel(_build(client), client.price)
    model: ChatModel = SingleFlightModel(built, model=client.model, seed=client.seed, options=client.options)
    if client.cache_dir is not None:
        cache = ResponseCache(client.cache_dir)
        model = CachedModel(model, cache, model=client.model, seed=client.seed, options=client.options,
                            identity=None if client.is_sim else client.identity())
    return model


def get_chat_model(client: LLMClient) -> ChatModel:
    """The process-wide model for ``client`` (built on first use, then reused across tasks and ticks)."""
    key = client.cache_key()
    model = _MODELS.get(key)
    if model is None:
        model = _MODELS[key] = _compose(client)
        _BUILDS[key] += 1
    return model


def caller_model(
    client: LLMClient,
    meter: Meter,
    *,
    caller: str,
    role: str | None = None,
    trace: TraceRecorder | None = None,
    budget: BudgetGate | None = None,
) -> MeteredModel:
    """One caller's stack over the process stack of ``client``: meter, then trace, then budget.

    A call refused by the budget still gets its ``llm.completion`` span (status error) and its
    ``llm_calls`` record (status error); a call answered from the cache is free.

    Args:
        client: the connection (its process stack is shared by every caller in the process).
        meter: where this caller's totals and call records go.
        caller: who calls, as recorded (``"agent:12"``, ``"router"``, ``"helper"``).
        role: the role recorded with each call; default ``client.role``.
        trace: where the ``llm.completion`` spans go; None: no spans.
        budget: the allowance the calls are charged to; None: unlimited.
    """
    model = get_chat_model(client)
    if client.context_window is not None:
        model = WindowedModel(model, client.context_window, max_tokens=client.options.get("max_tokens"))
    if budget is not None:
        model = BudgetedModel(model, budget)
    if trace is not None:
        model = TracedModel(model, trace)
    return MeteredModel(model, meter, caller=caller, role=role or client.role, secret=_secret(client))


def _secret(client: LLMClient) -> str | None:
    """The key the records must not carry (None: the client sends none, or its variable is unset and
    every call fails before sending anything)."""
    with contextlib.suppress(LLMCallError):
        key = resolve_api_key(client)
        return key if key != NO_KEY else None
    return None


def flush_response_caches() -> int:
    """Write what this process's response caches hold in memory (see :mod:`engine.llm.wrappers.cache`); returns how many answers.

    Called where a transaction's work in a process ends (a batch task, the env step, the driver's commit), so
    that every answer a committed transaction used is on disk before the commit."""
    return sum(model.cache.flush() for model in list(_MODELS.values()) if isinstance(model, CachedModel))


def refresh_response_caches() -> None:
    """Let this process's response caches look for packs other processes wrote (at the start of a batch task)."""
    for model in list(_MODELS.values()):
        if isinstance(model, CachedModel):
            model.cache.refresh()


def limiter_for(client: LLMClient) -> AdaptiveSemaphore | None:
    """This process's limiter for ``client``; None for in-process ``sim/*`` or before first use."""
    return _LIMITERS.get(client.cache_key())


def dispatcher_stats() -> dict[str, int]:
    """How many backends this process built, and its pid."""
    return {"pid": os.getpid(), "builds": sum(_BUILDS.values()), "clients": len(_MODELS)}
