"""Backends: the ChatModels that answer, at the bottom of every stack. OpenAI-compatible endpoints over aiohttp
(:mod:`~engine.llm.backends.openai_http`), other providers through litellm (:mod:`~engine.llm.backends.litellm_backend`),
the simulated LLM in this process (:mod:`~engine.llm.backends.sim_backend`) and fixed answers
(:mod:`~engine.llm.backends.scripted`, a shipped fake)."""

__all__: list[str] = []
