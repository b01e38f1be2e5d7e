"""The template cache's file: one JSON document per environment configuration, safe to share.

Several routers may use one file at once: the env actors of concurrent runs whose cache lives
under ``$POLIS_HOME``. A write holds an exclusive ``flock`` on the file's directory (the file itself
is replaced on every write, so it cannot carry the lock) while it reads what is on disk, lets the cache merge in entries others wrote meanwhile, and replaces the file
atomically (temp file and rename), so a reader never sees half a file and no writer drops the
entries of another.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from engine.errors import StorageError
from engine.storage.atomic import atomic_write_json, read_json

__all__ = ["CACHE_VERSION", "TemplateStore"]

log = logging.getLogger(__name__)

#: The file format's version; files of another version are ignored (and replaced on the next write).
CACHE_VERSION = 1


class TemplateStore:
    """Reads and writes one cache file.

    Args:
        path: the JSON file.
        embedder: the name of the vector space of the embeddings written (others' are dropped on read).
    """

    def __init__(self, path: Path, embedder: str) -> None:
        self.path = Path(path)
        self.embedder = embedder

    def read(self) -> list[dict[str, Any]]:
        """The stored entries (``mode``, ``template``, ``code``, ``embedding``, ``uses``, ``exact_only``).

        Embeddings of another vector space come back as None. An unreadable file or one of another
        version reads as empty (with a warning for the unreadable one): the cache only saves work.
        """
        try:
            saved = read_json(self.path, default=None)
        except StorageError as error:
            log.warning("ignoring unreadable CodeGen cache: %s", error)
            return []
        if not isinstance(saved, dict) or saved.get("version") != CACHE_VERSION:
            return []
        same_space = saved.get("embedder") == self.embedder
        entries = []
        for item in saved.get("entries", []):
            if isinstance(item, dict) and isinstance(item.get("code"), str) and isinstance(item.get("template"), str):
                entries.append({
                    "mode": item.get("mode"), "template": item["template"], "code": item["code"],
                    "embedding": item.get("embedding") if same_space else None, "uses": int(item.get("uses", 0)),
                    "exact_only": bool(item.get("exact_only", False)),
                })  # fmt: skip
        return entries

    def write(self, entries: list[dict[str, Any]]) -> None:
        """Replace the file with ``entries`` (atomically; call inside :meth:`locked`).

        Raises:
            StorageError: the file system refused the write.
        """
        atomic_write_json(self.path, {"version": CACHE_VERSION, "embedder": self.embedder, "entries": entries}, durable=False)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the exclusive lock of the file's directory (other writers wait; readers never do).

        Raises:
            StorageError: the directory cannot be created or opened.
        """
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path.parent, os.O_RDONLY)
        except OSError as error:
            raise StorageError(f"cannot lock {self.path.parent}: {error}") from error
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # releases the lock
