"""The CodeGen template cache: generated code keyed by instruction template, reused with new variables.

A template is an instruction with ``{name}`` placeholders (``"send {amount} coins to agent {to}"``).
Lookup is an exact match on the normalized template, then the most similar stored template with
the same placeholder names whose embedding cosine similarity reaches the threshold. Entries are
kept per mode (``"ro"`` for read-only asks, ``"rw"`` otherwise) and persisted as one JSON file per
environment configuration. Concurrent misses on one template share a single generation.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

from engine.env.routers.embedding import Embedder, SimEmbedder
from engine.errors import StorageError
from engine.storage.atomic import atomic_write_json, read_json

__all__ = ["CacheHit", "CacheStats", "TemplateCache", "fill_template", "normalize_template", "placeholders"]

log = logging.getLogger(__name__)
T = TypeVar("T")
_PLACEHOLDER = re.compile(r"\{(\w+)\}")
_VERSION = 1


def placeholders(template: str) -> frozenset[str]:
    """The ``{name}`` placeholders of a template."""
    return frozenset(_PLACEHOLDER.findall(template))


def fill_template(template: str, variables: Mapping[str, Any]) -> str:
    """Substitute ``{name}`` placeholders that have a value; others are left as they are.

    Only bare names are substituted (no ``str.format`` field access or format specs).
    """
    return _PLACEHOLDER.sub(lambda m: str(variables[m.group(1)]) if m.group(1) in variables else m.group(0), template)


def normalize_template(template: str) -> str:
    """The exact-match key: whitespace collapsed."""
    return " ".join(template.split())


@dataclass
class CacheStats:
    """How the template cache has been doing (one router's lifetime)."""

    hits_exact: int = 0  #: lookups answered by an identical template
    hits_similar: int = 0  #: lookups answered by a similar template
    misses: int = 0  #: lookups that found nothing
    generations: int = 0  #: code generations run (concurrent misses on one template share one)
    errors: int = 0  #: generations without working code, plus cached code evicted after failing

    @property
    def requests(self) -> int:
        return self.hits_exact + self.hits_similar + self.misses

    @property
    def hit_rate(self) -> float:
        return (self.hits_exact + self.hits_similar) / self.requests if self.requests else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "requests": self.requests, "hit_rate": self.hit_rate}


@dataclass(frozen=True)
class CacheHit:
    """A cached generation found for a template."""

    mode: str
    key: str  #: the stored entry's normalized template
    code: str
    similarity: float  #: 1.0 for an exact match


class TemplateCache:
    """Generated code by template, with similarity lookup, single-flight and JSON persistence.

    Args:
        path: the JSON file (loaded now, rewritten atomically on every change); None keeps the
            cache in memory.
        embedder: embeds templates for similarity lookup (default: the simulated embeddings).
        threshold: the cosine similarity a stored template needs to be reused.
        max_entries: entries kept per mode; the least used go first.
    """

    def __init__(
        self, path: Path | None = None, *, embedder: Embedder | None = None, threshold: float = 0.85, max_entries: int = 1000
    ) -> None:
        if not 0.0 < threshold <= 1.0:
            raise ValueError(f"similarity threshold must be in (0, 1], got {threshold}")
        self.path = path
        self.embedder = embedder or SimEmbedder()
        self.threshold = threshold
        self.max_entries = max_entries
        self.stats = CacheStats()
        self._entries: dict[str, dict[str, dict[str, Any]]] = {"ro": {}, "rw": {}}
        self._vectors: dict[str, list[float]] = {}  # query templates embedded so far
        self._flights: dict[tuple[str, str], asyncio.Future[Any]] = {}
        self._load()

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._entries.values())

    # ---- lookup ------------------------------------------------------------------------------
    async def lookup(self, mode: str, template: str) -> CacheHit | None:
        """The cached code for ``template``: an exact match, else the most similar one above the threshold."""
        key = normalize_template(template)
        entries = self._entries[mode]
        entry = entries.get(key)
        if entry is not None:
            self.stats.hits_exact += 1
            entry["uses"] += 1
            return CacheHit(mode, key, entry["code"], 1.0)
        names = sorted(placeholders(key))
        candidates = [e for e in entries.values() if e["names"] == names]
        best, best_score = None, -1.0
        if candidates:
            await self._embed_missing(candidates)
            query = await self._vector(key)
            for candidate in candidates:
                score = sum(a * b for a, b in zip(query, candidate["embedding"], strict=True))
                if score > best_score:
                    best, best_score = candidate, score
        if best is None or best_score < self.threshold:
            self.stats.misses += 1
            return None
        self.stats.hits_similar += 1
        best["uses"] += 1
        return CacheHit(mode, best["template"], best["code"], best_score)

    async def _vector(self, key: str) -> list[float]:
        if key not in self._vectors:
            if len(self._vectors) > 4 * self.max_entries:
                self._vectors.clear()
            self._vectors[key] = (await self.embedder.embed([key]))[0]
        return self._vectors[key]

    async def _embed_missing(self, entries: list[dict[str, Any]]) -> None:
        missing = [e for e in entries if e.get("embedding") is None]
        if missing:
            vectors = await self.embedder.embed([e["template"] for e in missing])
            for entry, vector in zip(missing, vectors, strict=True):
                entry["embedding"] = vector

    # ---- changes -----------------------------------------------------------------------------
    async def store(self, mode: str, template: str, code: str) -> None:
        """Keep ``code`` for ``template`` (replacing an entry for the same template)."""
        key = normalize_template(template)
        entries = self._entries[mode]
        entries[key] = {
            "template": key, "names": sorted(placeholders(key)), "code": code,
            "embedding": await self._vector(key), "uses": 0,
        }  # fmt: skip
        while len(entries) > self.max_entries:
            victim = min(entries, key=lambda k: entries[k]["uses"])  # ties: the oldest (dicts keep order)
            del entries[victim]
        self._save()

    def evict(self, hit: CacheHit) -> None:
        """Drop an entry whose code failed when it was reused (counted as an error)."""
        if self._entries[hit.mode].pop(hit.key, None) is not None:
            self.stats.errors += 1
            self._save()

    async def generate_once(
        self, mode: str, template: str, factory: Callable[[], Awaitable[tuple[str | None, T]]]
    ) -> tuple[str | None, T, bool]:
        """Run ``factory`` once for concurrent callers with the same template; store its code.

        Args:
            mode: ``"ro"`` or ``"rw"``.
            template: the instruction template.
            factory: generates (and checks) code; returns ``(code or None, payload)``.

        Returns:
            ``(code, payload, leader)``: every caller gets the leader's code and payload;
            ``leader`` is True for the one caller whose ``factory`` ran.
        """
        key = (mode, normalize_template(template))
        flight = self._flights.get(key)
        if flight is not None:
            code, payload = await asyncio.shield(flight)
            return code, payload, False

        async def lead() -> tuple[str | None, T]:
            self.stats.generations += 1
            code, payload = await factory()
            if code is None:
                self.stats.errors += 1
            else:
                await self.store(mode, template, code)
            return code, payload

        # Its own task: a cancelled leader does not take the followers' answer with it.
        flight = asyncio.ensure_future(lead())
        self._flights[key] = flight
        flight.add_done_callback(lambda done: self._flights.pop(key) if self._flights.get(key) is done else None)
        code, payload = await asyncio.shield(flight)
        return code, payload, True

    # ---- persistence -------------------------------------------------------------------------
    def _load(self) -> None:
        if self.path is None:
            return
        try:
            saved = read_json(self.path, default=None)
        except StorageError as error:
            log.warning("ignoring unreadable CodeGen cache: %s", error)
            return
        if not isinstance(saved, dict) or saved.get("version") != _VERSION:
            return
        same_space = saved.get("embedder") == self.embedder.name
        for item in saved.get("entries", []):
            mode = item.get("mode")
            if mode in self._entries and isinstance(item.get("code"), str) and isinstance(item.get("template"), str):
                key = normalize_template(item["template"])
                self._entries[mode][key] = {
                    "template": key, "names": sorted(placeholders(key)), "code": item["code"],
                    "embedding": item.get("embedding") if same_space else None, "uses": int(item.get("uses", 0)),
                }  # fmt: skip

    def _save(self) -> None:
        if self.path is None:
            return
        entries = [{"mode": mode, **entry} for mode, by_key in self._entries.items() for entry in by_key.values()]
        try:
            atomic_write_json(self.path, {"version": _VERSION, "embedder": self.embedder.name, "entries": entries}, durable=False)
        except StorageError as error:  # the cache is an optimisation: a failed write costs regenerations only
            log.warning("could not persist the CodeGen cache: %s", error)
