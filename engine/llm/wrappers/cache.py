"""Response cache: answers stored by request key, so a rerun with the same seed costs nothing.

Answers are kept in packs (:mod:`engine.storage.packs`), never one file per call: each process
buffers the answers it learns and writes them as one pack, named uniquely, when
:func:`~engine.llm.dispatcher.flush_response_caches` runs (at the end of every batch task, env step
and driver commit) or the buffer fills. So several worker processes share one cache (a directory, or a
prefix of an object store) without coordination, and a committed transaction's answers are stored
before its commit. The cache also keeps which models answered into it (:meth:`ResponseCache.vouch`): a fork, a
rerun or a resume served from it skips the preflight's test call to a model that answered before, so it costs no
provider call at all. A cache directory of an older Polis (one JSON file per answer,
``<key[:2]>/<key>.json``) is still read.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
import uuid
from collections import OrderedDict
from dataclasses import asdict, replace
from typing import Any

from engine.errors import StorageError, StoreKeyNotFoundError
from engine.llm.protocol import ChatModel, ChatResult
from engine.llm.request_key import request_key
from engine.storage.packs import PackReader, PackWriter
from engine.storage.store import open_store

__all__ = ["CachedModel", "ResponseCache"]

_SUFFIX = ".llmpack"
_FLUSH_AT = 2048  #: answers buffered before a pack is written without waiting for a flush
_READERS = 16  #: packs whose parsed index stays in memory (a rerun reads its hits pack by pack)
_SETTLED_NS = 100_000_000  #: a directory mtime older than this is trusted to have seen every pack renamed in by then
#: A miss lists the directory again at most this often: in a busy run every batch adds a pack, and misses are
#: the rule (a cache pays off on a rerun, resume or fork, whose packs are all there at the first miss).
_RESCAN_S = 2.0
_ANSWERED = "answered"  #: the folder of the cache's markers of models that answered into it


def _answered_key(identity: str) -> str:
    return f"{_ANSWERED}/{hashlib.sha256(identity.encode('utf-8')).hexdigest()[:40]}"


def _bucket(key: str) -> int:
    """The pack 'agent' a key is filed under: 256 buckets, so reading one answer decompresses ~1/256 of a pack."""
    return int(key[:2], 16)


class ResponseCache:
    """A store of cached answers.

    Args:
        location: where answers live: a directory (created on first write) or a URL (``s3://bucket/cache``).
    """

    def __init__(self, location: str | os.PathLike[str]) -> None:
        self.store = open_store(location)
        self.hits = 0
        self.misses = 0
        self._pending: dict[str, bytes] = {}
        # key -> the pack holding it: strings only, which the garbage collector never traverses. A run's
        # workers index every answer of the run; keeping each pack's parsed index instead made every full
        # collection walk millions of objects (a 100,000-agent run's ticks slowed from tick to tick).
        self._index: dict[str, str] = {}
        self._seen: set[str] = set()  #: packs indexed
        self._readers: OrderedDict[str, PackReader] = OrderedDict()  #: the few packs read last
        self._scanned: int | None = None  #: the directory's mtime when it was last scanned
        self._scanned_at = -_RESCAN_S  #: time.monotonic() of the last listing
        self._lock = threading.Lock()
        self._vouched: set[str] = set()  #: identities this process has marked

    def vouch(self, identity: str) -> None:
        """Mark that the model ``identity`` names (:meth:`~engine.llm.client.LLMClient.identity`) answered into this
        cache (once per process: a small object, written if absent)."""
        if identity in self._vouched:
            return
        self.store.set_if_absent(_answered_key(identity), identity.encode("utf-8"))
        self._vouched.add(identity)

    def vouched(self, identity: str) -> bool:
        """Whether the model ``identity`` names has answered into this cache (this run, its parent, an earlier run)."""
        try:
            return identity in self._vouched or self.store.exists(_answered_key(identity))
        except StorageError:
            return False

    def _stamp(self) -> int | None:
        """The directory's mtime: it changes whenever a pack is renamed into it, by any process. An object store has
        none: a fresh value, so that a miss lists again (at most every ``_RESCAN_S``)."""
        root = self.store.local_root
        if root is None:
            return time.time_ns()
        try:
            return root.stat().st_mtime_ns
        except FileNotFoundError:
            return None

    def _scan(self) -> None:
        """Index packs not seen yet (written by this or another process), if any was added since the last scan."""
        if time.monotonic() - self._scanned_at < _RESCAN_S:
            return
        stamp = self._stamp()
        if stamp is None or stamp == self._scanned:
            return
        self._scanned_at = time.monotonic()
        # A directory's mtime ticks coarsely (a few ms): a pack renamed in within the same tick as the one just
        # seen leaves it unchanged, so a recent stamp is not trusted, and the next miss lists again.
        self._scanned = stamp if time.time_ns() - stamp > _SETTLED_NS else None
        try:
            names = [k for k in self.store.list_dir("")[0] if k.endswith(_SUFFIX) and k not in self._seen]
        except StorageError:
            return
        for name in names:
            try:
                reader = PackReader(self.store, name, keep_frames=False)
            except StorageError:
                continue  # a torn pack of a killed writer: its answers are misses
            self._seen.add(name)
            for key in reader.keys():
                self._index.setdefault(key, name)

    def _read(self, key: str) -> bytes | None:
        with self._lock:
            if key in self._pending:
                return self._pending[key]
            if key not in self._index:
                self._scan()  # a listing only when another pack arrived, at most every _RESCAN_S
            name = self._index.get(key)
        if name is not None:
            reader = self._reader(name)
            (segment,) = reader.tree(_bucket(key)).files[key]
            return reader.frame(_bucket(key))[segment.start:segment.start + segment.length]
        if self.store.local_root is None:
            return None
        try:
            return self.store.get(f"{key[:2]}/{key}.json")  # an older Polis's one file per answer (on disk only)
        except StoreKeyNotFoundError:
            return None

    def _reader(self, name: str) -> PackReader:
        with self._lock:
            reader = self._readers.pop(name, None)
        if reader is None:
            reader = PackReader(self.store, name, keep_frames=False)
        with self._lock:
            self._readers[name] = reader
            while len(self._readers) > _READERS:
                self._readers.popitem(last=False)
        return reader

    def get(self, key: str) -> ChatResult | None:
        try:
            data = self._read(key)
            result = ChatResult(**json.loads(data)) if data is not None else None
        except (StorageError, ValueError, TypeError):  # a corrupt pack or a foreign file: a miss, never an invented answer
            result = None
        if result is None:
            self.misses += 1
            return None
        self.hits += 1
        return result

    def put(self, key: str, result: ChatResult) -> None:
        data = json.dumps(asdict(replace(result, cached=False)), default=str, ensure_ascii=False).encode("utf-8")
        with self._lock:
            self._pending[key] = data
            full = len(self._pending) >= _FLUSH_AT
        if full:
            self.flush()

    def refresh(self) -> None:
        """Let the next miss list the directory again (a batch task starts: another run may have left packs)."""
        self._scanned_at = -_RESCAN_S

    def flush(self) -> int:
        """Write the buffered answers as one pack; returns how many."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return 0
        name = f"{uuid.uuid4().hex}{_SUFFIX}"
        writer = PackWriter(name, 0)
        buckets: dict[int, dict[str, list[Any]]] = {}
        for key, data in pending.items():
            buckets.setdefault(_bucket(key), {})[key] = [data]
        for bucket, files in sorted(buckets.items()):
            writer.add(bucket, files, [])
        writer.write(self.store)
        with self._lock:
            self._seen.add(name)
            for key in pending:
                self._index[key] = name
        return len(pending)


class CachedModel:
    """Serve repeated requests from a :class:`ResponseCache`; ask ``inner`` on a miss.

    Args:
        inner: the model (usually single-flight, retrying, limited).
        cache: the cache.
        model: the client's model string (part of the key).
        seed: the experiment seed (part of the key).
        options: the client's request options (part of the key).
        identity: the client's model, endpoint, key variable and options (:meth:`LLMClient.identity`): vouched for in
            the cache once its provider answered (:meth:`ResponseCache.vouch`); None: never vouched for.
    """

    def __init__(self, inner: ChatModel, cache: ResponseCache, *, model: str, seed: int, options: dict[str, Any] | None = None,
                 identity: str | None = None) -> None:
        self._inner = inner
        self._identity = identity
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
        if self._identity is not None:
            self.cache.vouch(self._identity)  # the provider answered: a rerun from this cache needs no test call
        return result
