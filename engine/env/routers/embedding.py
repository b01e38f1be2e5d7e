"""Text embeddings for the CodeGen template cache: simulated (default), wordllama, or litellm."""

from __future__ import annotations

import asyncio
import importlib.util
import math
from typing import Any, Protocol, runtime_checkable

from engine.errors import SpecError
from engine.llm.sim.model import SimLLM

__all__ = ["Embedder", "LiteLLMEmbedder", "SimEmbedder", "WordLlamaEmbedder", "resolve_embedder", "wordllama_available"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit vectors; ``name`` identifies the vector space (stored with vectors)."""

    name: str

    async def embed(self, texts: list[str]) -> list[list[float]]:
        """One unit vector per text."""
        ...


class SimEmbedder:
    """The simulated LLM's deterministic hashed bag-of-words embeddings (no download, no network).

    Args:
        seed: the simulated model's seed.
        dim: vector length (more dimensions, fewer accidental collisions between words).
    """

    def __init__(self, seed: int = 0, dim: int = 256) -> None:
        self._sim = SimLLM(name="embedding", seed=seed)
        self._dim = dim
        self.name = f"sim/{seed}/{dim}"

    async def embed(self, texts: list[str]) -> list[list[float]]:
        return self._sim.embed(texts, dim=self._dim)


def wordllama_available() -> bool:
    """True when the optional ``wordllama`` package is installed."""
    return importlib.util.find_spec("wordllama") is not None


class WordLlamaEmbedder:
    """wordllama's small static embeddings (an optional dependency that works offline).

    Args:
        dim: vector length (wordllama ships 256-dimensional weights in its wheel).

    Raises:
        SpecError: wordllama is not installed.
    """

    def __init__(self, dim: int = 256) -> None:
        if not wordllama_available():
            raise SpecError("the 'wordllama' embedder needs the optional package wordllama (pip install wordllama)")
        self.name = f"wordllama/{dim}"
        self._dim = dim
        self._model: Any = None

    async def embed(self, texts: list[str]) -> list[list[float]]:
        if self._model is None:
            from wordllama import WordLlama

            self._model = await asyncio.to_thread(WordLlama.load, dim=self._dim)
        vectors = self._model.embed(texts, norm=True)
        return [_unit([float(x) for x in row]) for row in vectors]


class LiteLLMEmbedder:
    """Any embedding model litellm can call (``openai/text-embedding-3-small``, ...).

    Args:
        model: the litellm model string.
    """

    def __init__(self, model: str) -> None:
        self.model = model
        self.name = f"litellm/{model}"

    async def embed(self, texts: list[str]) -> list[list[float]]:
        import litellm

        response = await litellm.aembedding(model=self.model, input=texts)
        return [_unit([float(x) for x in item["embedding"]]) for item in response.data]


def resolve_embedder(spec: str | None, *, seed: int = 0) -> Embedder:
    """The embedder named by a spec string.

    Args:
        spec: None or ``"sim"`` (default), ``"wordllama"``, ``"auto"`` (wordllama when installed,
            else sim), or a litellm embedding model string.
        seed: the seed of the simulated embedder.

    Raises:
        SpecError: ``"wordllama"`` without the package installed.
    """
    if spec in (None, "sim"):
        return SimEmbedder(seed=seed)
    if spec == "auto":
        return WordLlamaEmbedder() if wordllama_available() else SimEmbedder(seed=seed)
    if spec == "wordllama":
        return WordLlamaEmbedder()
    return LiteLLMEmbedder(spec)


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector
