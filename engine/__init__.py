"""Polis engine: the simulation (agents, environment, LLM, society, storage, trace)."""

__all__: list[str] = []
