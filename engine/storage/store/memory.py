"""A store in a dict of this process: the shipped fake for tests."""

from __future__ import annotations

import threading

from engine.errors import StoreKeyNotFoundError
from engine.storage.store.base import Store, check_key, check_prefix, dir_prefix

__all__ = ["MemoryStore"]


class MemoryStore(Store):
    """Values in a dict of this process, guarded by a lock. Children are views of the same dict."""

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}
        self._lock = threading.Lock()
        self._base = ""

    @property
    def url(self) -> str:
        return f"memory-store:{id(self._data):#x}/{self._base}"

    def get(self, key: str) -> bytes:
        with self._lock:
            value = self._data.get(self._base + check_key(key))
        if value is None:
            raise StoreKeyNotFoundError(key, self.url)
        return value

    def set(self, key: str, value: bytes) -> None:
        full, data = self._base + check_key(key), bytes(value)
        with self._lock:
            self._data[full] = data

    def set_if_absent(self, key: str, value: bytes) -> bool:
        full, data = self._base + check_key(key), bytes(value)
        with self._lock:
            if full in self._data:
                return False
            self._data[full] = data
        return True

    def exists(self, key: str) -> bool:
        full = self._base + check_key(key)
        with self._lock:
            return full in self._data

    def size(self, key: str) -> int:
        return len(self.get(key))

    def list_prefix(self, prefix: str) -> list[str]:
        start = self._base + check_prefix(prefix)
        with self._lock:
            return sorted(key[len(self._base) :] for key in self._data if key.startswith(start))

    def list_dir(self, prefix: str) -> tuple[list[str], list[str]]:
        base = dir_prefix(prefix)
        files: set[str] = set()
        dirs: set[str] = set()
        for key in self.list_prefix(base):
            head, sep, _ = key[len(base) :].partition("/")
            (dirs if sep else files).add(head)
        return sorted(files), sorted(dirs)

    def delete(self, key: str) -> None:
        full = self._base + check_key(key)
        with self._lock:
            self._data.pop(full, None)

    def delete_prefix(self, prefix: str) -> int:
        start = self._base + check_prefix(prefix)
        with self._lock:
            doomed = [key for key in self._data if key.startswith(start)]
            for key in doomed:
                del self._data[key]
        return len(doomed)

    def child(self, prefix: str) -> MemoryStore:
        view = MemoryStore()
        view._data, view._lock = self._data, self._lock
        view._base = f"{self._base}{check_key(prefix.removesuffix('/'))}/"
        return view
