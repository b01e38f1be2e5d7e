"""Text embeddings for the CodeGen template cache: simulated (default), wordllama, or litellm."""

from __future__ import annotations

import asyncio
import importlib.util
import math
from collections.abc import Mapping
from typing import Any, ClassVar, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from engine.errors import SpecError
from engine.llm.sim.model import SimLLM

__all__ = [
    "Embedder",
    "LiteLLMEmbedder",
    "SimEmbedder",
    "VectorSize",
    "WordLlamaEmbedder",
    "embedder_class",
    "resolve_embedder",
    "wordllama_available",
]


class _Config(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class VectorSize(_Config):
    """An embedder whose vector length is chosen (``embedder_config.dim``)."""

    dim: int = Field(256, ge=8, le=4096, description="vector length")


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

    Config: ClassVar[type[BaseModel]] = VectorSize

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

    Config: ClassVar[type[BaseModel]] = VectorSize

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
        dimensions: vector length, for models that shorten theirs on request (None: the model's own).
    """

    class Config(_Config):
        dimensions: int | None = Field(None, ge=1, description="vector length, for models that shorten theirs on request")

    def __init__(self, model: str, dimensions: int | None = None) -> None:
        self.model = model
        self.dimensions = dimensions
        self.name = f"litellm/{model}" + (f"/{dimensions}" if dimensions is not None else "")

    async def embed(self, texts: list[str]) -> list[list[float]]:
        import litellm

        sized = {"dimensions": self.dimensions} if self.dimensions is not None else {}
        response = await litellm.aembedding(model=self.model, input=texts, **sized)
        return [_unit([float(x) for x in item["embedding"]]) for item in response.data]


def embedder_class(spec: str | None) -> type[SimEmbedder] | type[WordLlamaEmbedder] | type[LiteLLMEmbedder]:
    """The class a spec string names (``auto`` is checked as the simulated one, whose config wordllama's matches)."""
    if spec in (None, "sim", "auto"):
        return SimEmbedder
    return WordLlamaEmbedder if spec == "wordllama" else LiteLLMEmbedder


def resolve_embedder(spec: str | None, *, seed: int = 0, config: Mapping[str, Any] | None = None) -> Embedder:
    """The embedder named by a spec string.

    Args:
        spec: None or ``"sim"`` (default), ``"wordllama"``, ``"auto"`` (wordllama when installed,
            else sim), or a litellm embedding model string.
        seed: the seed of the simulated embedder.
        config: the spec's ``embedder_config`` (its class's ``Config``).

    Raises:
        SpecError: ``"wordllama"`` without the package installed.
        pydantic.ValidationError: ``config`` does not fit the embedder (a parsed spec's always does).
    """
    settings = dict(embedder_class(spec).Config.model_validate(dict(config or {})))
    if spec in (None, "sim") or (spec == "auto" and not wordllama_available()):
        return SimEmbedder(seed=seed, **settings)
    if spec in ("auto", "wordllama"):
        return WordLlamaEmbedder(**settings)
    assert spec is not None
    return LiteLLMEmbedder(spec, **settings)


def _unit(vector: list[float]) -> list[float]:
    norm = math.sqrt(sum(x * x for x in vector))
    return [x / norm for x in vector] if norm else vector
