"""The LLM layer: serializable clients, per-process dispatch, wrappers, and the simulated LLM.

Imports no agent, env or society code. OpenAI-compatible endpoints (every ``base_url`` and every
``openai/*`` model) are called over aiohttp (``engine.llm.backends.openai_http``); litellm is imported only
on the path that talks to another provider (``engine.llm.backends.litellm_backend``).
"""

from engine.llm.client import LLMClient
from engine.llm.dispatcher import caller_model, dispatcher_stats, get_chat_model
from engine.llm.meter import CallRecord, Meter, MeteredModel
from engine.llm.prompt import PromptTemplate
from engine.llm.protocol import ChatModel, ChatResult
from engine.llm.structured import complete_structured
from engine.llm.wrappers.retry import RetryingModel

__all__ = [
    "CallRecord",
    "ChatModel",
    "ChatResult",
    "LLMClient",
    "Meter",
    "MeteredModel",
    "PromptTemplate",
    "RetryingModel",
    "caller_model",
    "complete_structured",
    "dispatcher_stats",
    "get_chat_model",
]
