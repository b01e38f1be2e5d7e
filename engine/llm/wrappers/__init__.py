"""Wrappers: each a ChatModel around another ChatModel, adding one concern (a bounded, adaptive number of calls in
flight, a response cache and single flight, retries and timeouts, spans, prices). The dispatcher
(:mod:`engine.llm.dispatcher`) stacks them; each can also be used alone around any ChatModel."""

__all__: list[str] = []
