"""Response cache: answers stored on disk by request key, so a rerun with the same seed costs nothing.

One JSON file per answer (``<dir>/<key[:2]>/<key>.json``, written atomically), so several worker
processes can share one cache directory without coordination.
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from engine.llm.protocol import ChatModel, ChatResult
from engine.llm.request_key import request_key
from engine.storage.atomic import atomic_write_json

__all__ = ["CachedModel", "ResponseCache"]


class ResponseCache:
    """A directory of cached answers.

    Args:
        directory: where answers live (created on first write).
    """

    def __init__(self, directory: Path) -> None:
        self.directory = Path(directory)
        self.hits = 0
        self.misses = 0

    def _path(self, key: str) -> Path:
        return self.directory / key[:2] / f"{key}.json"

    def get(self, key: str) -> ChatResult | None:
        try:
            data = json.loads(self._path(key).read_text(encoding="utf-8"))
        except FileNotFoundError:
            self.misses += 1
            return None
        except (json.JSONDecodeError, UnicodeDecodeError):
            # A torn or foreign file is a miss; the next answer overwrites it atomically.
            self.misses += 1
            return None
        self.hits += 1
        return ChatResult(**data)

    def put(self, key: str, result: ChatResult) -> None:
        atomic_write_json(self._path(key), asdict(replace(result, cached=False)), durable=False)


class CachedModel:
    """Serve repeated requests from a :class:`ResponseCache`; ask ``inner`` on a miss.

    Args:
        inner: the model (usually single-flight, retrying, limited).
        cache: the cache.
        model: the client's model string (part of the key).
        seed: the experiment seed (part of the key).
        options: the client's request options (part of the key).
    """

    def __init__(self, inner: ChatModel, cache: ResponseCache, *, model: str, seed: int, options: dict[str, Any] | None = None) -> None:
        self._inner = inner
        self.cache = cache
        self._model = model
        self._seed = seed
        self._options = options or {}

    async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        key = request_key(self._model, self._seed, messages, options=self._options, **kwargs)
        hit = self.cache.get(key)
        if hit is not None:
            return replace(hit, cached=True, latency_ms=0.0)
        result = await self._inner.complete(messages, **kwargs)
        self.cache.put(key, result)
        return result
