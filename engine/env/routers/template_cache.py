"""The CodeGen template cache: generated code keyed by instruction template, reused with new variables.

A template is an instruction with ``{name}`` placeholders (``"send {amount} coins to agent {to}"``).
Lookup is an exact match on the normalized template, then the most similar stored template with
the same placeholder names whose embedding cosine similarity reaches the threshold (code that
quotes its template's own text is kept for exact matches only). Entries are kept per mode
(``"ro"`` for read-only asks, ``"rw"`` otherwise) and persisted as one JSON file per environment
configuration (:mod:`~engine.env.routers.template_store`), which concurrent runs may share.
Concurrent misses on one template share a single generation.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Generic, TypeVar

from engine.env.routers.embedding import Embedder, SimEmbedder
from engine.env.routers.template_store import TemplateStore
from engine.errors import StorageError
from engine.instruction_template import fill_template, placeholders

__all__ = [
    "CacheHit",
    "CacheStats",
    "Generated",
    "TemplateCache",
    "fill_template",
    "normalize_template",
    "placeholders",
]

log = logging.getLogger(__name__)
T = TypeVar("T")


def normalize_template(template: str) -> str:
    """The exact-match key: whitespace collapsed."""
    return " ".join(template.split())


@dataclass
class CacheStats:
    """How the template cache has been doing (one router's lifetime, or a difference of two such counts)."""

    hits_exact: int = 0  #: lookups answered by an identical template
    hits_similar: int = 0  #: lookups answered by a similar template
    misses: int = 0  #: lookups that found nothing
    generations: int = 0  #: code generations run (concurrent misses on one template share one)
    errors: int = 0  #: generations without working code, plus cached code evicted after failing
    uncacheable: int = 0  #: generations whose code worked but wrote its caller's values as literals (not stored)

    @property
    def requests(self) -> int:
        return self.hits_exact + self.hits_similar + self.misses

    @property
    def hit_rate(self) -> float:
        return (self.hits_exact + self.hits_similar) / self.requests if self.requests else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "requests": self.requests, "hit_rate": self.hit_rate}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> CacheStats:
        """The counts of an :meth:`as_dict` result (derived values are recomputed)."""
        return cls(**{f.name: int(data.get(f.name, 0)) for f in fields(cls)})

    def __add__(self, other: CacheStats) -> CacheStats:
        return CacheStats(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)})

    def __sub__(self, other: CacheStats) -> CacheStats:
        return CacheStats(**{f.name: getattr(self, f.name) - getattr(other, f.name) for f in fields(self)})


@dataclass(frozen=True)
class Generated(Generic[T]):
    """What a generation factory hands :meth:`TemplateCache.generate_once`."""

    code: str | None  #: the working code; None when the generation failed
    payload: T  #: whatever the callers need besides the code
    reusable: bool = True  #: False: the code works for its caller only (not stored, not shared)
    exact_only: bool = False  #: the code quotes its template's text: reuse it for that exact template only


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
        path: the JSON file (loaded now, rewritten atomically on every change and merged with what
            other writers stored meanwhile); None keeps the cache in memory.
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
        self._store = TemplateStore(path, self.embedder.name) if path is not None else None
        self._entries: dict[str, dict[str, dict[str, Any]]] = {"ro": {}, "rw": {}}
        self._dropped: set[tuple[str, str]] = set()  #: evicted here: not taken back from the file
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
        candidates = [e for e in entries.values() if e["names"] == names and not e["exact_only"]]
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
    async def store(self, mode: str, template: str, code: str, *, exact_only: bool = False) -> None:
        """Keep ``code`` for ``template`` (replacing an entry for the same template).

        Args:
            mode: ``"ro"`` or ``"rw"``.
            template: the instruction template.
            code: working code that reads the template's values from ``variables``.
            exact_only: never reuse it for a merely similar template (it quotes this one's text).
        """
        key = normalize_template(template)
        self._entries[mode][key] = _entry(key, code, await self._vector(key), uses=0, exact_only=exact_only)
        self._dropped.discard((mode, key))
        self._trim()
        self._save()

    def evict(self, hit: CacheHit) -> None:
        """Drop an entry whose code failed when it was reused (counted as an error)."""
        if self._entries[hit.mode].pop(hit.key, None) is not None:
            self.stats.errors += 1
            self._dropped.add((hit.mode, hit.key))
            self._save()

    def count_generation(self, *, ok: bool, reusable: bool = True) -> None:
        """Count a generation run outside :meth:`generate_once` (a caller that could not share one)."""
        self.stats.generations += 1
        if not ok:
            self.stats.errors += 1
        elif not reusable:
            self.stats.uncacheable += 1

    async def generate_once(
        self, mode: str, template: str, factory: Callable[[], Awaitable[Generated[T] | tuple[str | None, T]]]
    ) -> tuple[str | None, T, bool]:
        """Run ``factory`` once for concurrent callers with the same template; store its code.

        Args:
            mode: ``"ro"`` or ``"rw"``.
            template: the instruction template.
            factory: generates (and checks) code; returns a :class:`Generated` or ``(code or None, payload)``.

        Returns:
            ``(code, payload, leader)``: every caller gets the leader's payload and, when it was
            stored, its code (None for a failed or a non-reusable generation); ``leader`` is True
            for the one caller whose ``factory`` ran.
        """
        key = (mode, normalize_template(template))
        flight = self._flights.get(key)
        if flight is not None:
            code, payload = await asyncio.shield(flight)
            return code, payload, False

        async def lead() -> tuple[str | None, T]:
            made = await factory()
            if isinstance(made, tuple):
                made = Generated(*made)
            self.count_generation(ok=made.code is not None, reusable=made.reusable)
            if made.code is None or not made.reusable:
                return None, made.payload
            await self.store(mode, template, made.code, exact_only=made.exact_only)
            return made.code, made.payload

        # Its own task: a cancelled leader does not take the followers' answer with it.
        flight = asyncio.ensure_future(lead())
        self._flights[key] = flight
        flight.add_done_callback(lambda done: self._flights.pop(key) if self._flights.get(key) is done else None)
        code, payload = await asyncio.shield(flight)
        return code, payload, True

    def _trim(self) -> None:
        for entries in self._entries.values():
            while len(entries) > self.max_entries:
                victim = min(entries, key=lambda k: entries[k]["uses"])  # ties: the oldest (dicts keep order)
                del entries[victim]

    # ---- persistence -------------------------------------------------------------------------
    def _adopt(self, items: list[dict[str, Any]]) -> None:
        """Take in stored entries this cache does not hold (and did not evict)."""
        for item in items:
            mode = item["mode"]
            if mode not in self._entries:
                continue
            key = normalize_template(item["template"])
            if key in self._entries[mode] or (mode, key) in self._dropped:
                continue
            self._entries[mode][key] = _entry(key, item["code"], item["embedding"], uses=item["uses"], exact_only=item["exact_only"])

    def _load(self) -> None:
        if self._store is not None:
            self._adopt(self._store.read())
            self._trim()

    def _save(self) -> None:
        if self._store is None:
            return
        try:
            with self._store.locked():
                self._adopt(self._store.read())  # what other runs stored since: kept, and ours to use too
                self._trim()
                self._store.write([{"mode": mode, **entry} for mode, by_key in self._entries.items() for entry in by_key.values()])
        except StorageError as error:  # the cache is an optimisation: a failed write costs regenerations only
            log.warning("could not persist the CodeGen cache: %s", error)


def _entry(key: str, code: str, embedding: list[float] | None, *, uses: int, exact_only: bool) -> dict[str, Any]:
    return {
        "template": key, "names": sorted(placeholders(key)), "code": code,
        "embedding": embedding, "uses": uses, "exact_only": exact_only,
    }  # fmt: skip
