"""The store contract: what a key is, and the methods every store has.

A key is a relative POSIX path (``packs/000003-0001.pack``): not empty, not absolute, without empty, ``.`` or
``..`` segments, backslashes or NULs, and without a segment named like the temp file of an atomic write
(``.<name>.tmp-<hex>``, see :mod:`engine.storage.atomic`), which stores never list. Directories are implicit: one
exists while it holds a key. The helpers below are the one place these rules are checked; every store uses them.
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from engine.errors import StorageError, StoreKeyError, StoreKeyNotFoundError

__all__ = ["Store", "check_key", "check_prefix", "check_range", "describe_error", "dir_prefix", "is_temp_name", "redact_url"]


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is the temp file of an atomic write (``.<name>.tmp-<hex>``)."""
    return name.startswith(".") and ".tmp-" in name


def check_key(key: str) -> str:
    """Return ``key`` if it is a valid store key.

    Raises:
        StoreKeyError: it is not; the message says why.
    """
    problem = ""
    if not isinstance(key, str) or not key:
        problem = "it is empty"
    elif key.startswith("/"):
        problem = "it is absolute"
    elif "\\" in key or "\0" in key:
        problem = "it holds a backslash or a NUL"
    elif any(part in ("", ".", "..") for part in key.split("/")):
        problem = "it has an empty, '.' or '..' segment"
    elif any(is_temp_name(part) for part in key.split("/")):
        problem = "a segment is named like a temp file (.<name>.tmp-<hex>)"
    if problem:
        raise StoreKeyError(f"bad store key {key!r}: {problem}")
    return key


def check_prefix(prefix: str) -> str:
    """Return ``prefix`` if it is "" or a valid key, optionally followed by one "/".

    Raises:
        StoreKeyError: it is not.
    """
    if prefix:
        check_key(prefix.removesuffix("/"))
    return prefix


def dir_prefix(prefix: str) -> str:
    """Return the directory prefix that ``prefix`` (with or without its trailing "/") names: "" or ending in "/".

    Raises:
        StoreKeyError: ``prefix`` is no valid prefix.
    """
    return check_prefix(prefix).removesuffix("/") + "/" if prefix else ""


def check_range(start: int, length: int) -> None:
    """Refuse a negative ``start`` or ``length`` of :meth:`Store.get_range` with a ValueError."""
    if start < 0 or length < 0:
        raise ValueError(f"a range needs start >= 0 and length >= 0, not start={start}, length={length}")


def describe_error(exc: BaseException) -> str:
    """Return ``"<type>: <message>"`` of ``exc`` for a StorageError's message (just the type when it has none)."""
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def redact_url(url: str) -> str:
    """Return ``url`` without the user and password its authority may carry (``s3://***@bucket/key``)."""
    scheme, sep, rest = url.partition("://")
    authority, slash, path = rest.partition("/")
    if sep and "@" in authority:
        authority = "***@" + authority.rpartition("@")[2]
    return f"{scheme}{sep}{authority}{slash}{path}"


class Store(ABC):
    """A flat key/value store of bytes; keys are '/'-separated relative paths, their parents implicit.

    Every method is synchronous and safe to call from several threads. A bad key raises
    :class:`~engine.errors.StoreKeyError`; any other failure of the medium raises
    :class:`~engine.errors.StorageError` naming the location.
    """

    @property
    @abstractmethod
    def url(self) -> str:
        """The store's root as a URL or a plain path, for messages (never with credentials)."""

    @property
    def local_root(self) -> Path | None:
        """The store's directory on local disk, or None when the store is not one."""
        return None

    @abstractmethod
    def get(self, key: str) -> bytes:
        """Return the value of ``key``.

        Raises:
            StoreKeyNotFoundError: the store holds no ``key``.
        """

    def get_range(self, key: str, start: int, length: int) -> bytes:
        """Return up to ``length`` bytes of ``key``'s value from offset ``start`` (fewer at its end, none past it).

        Raises:
            StoreKeyNotFoundError: the store holds no ``key``.
            ValueError: ``start`` or ``length`` is negative.
        """
        check_range(start, length)
        return self.get(key)[start : start + length]

    @abstractmethod
    def set(self, key: str, value: bytes) -> None:
        """Write ``value`` under ``key`` atomically: a reader sees the old value or the new one, never a part."""

    @abstractmethod
    def set_if_absent(self, key: str, value: bytes) -> bool:
        """Write ``value`` under ``key`` only if the store holds no ``key``; return whether it wrote.

        Exclusive where the medium allows it (a local disk, S3's conditional put); check-then-write elsewhere.
        """

    @abstractmethod
    def exists(self, key: str) -> bool:
        """Whether the store holds ``key`` (a directory is no key)."""

    @abstractmethod
    def size(self, key: str) -> int:
        """Return the length of ``key``'s value in bytes.

        Raises:
            StoreKeyNotFoundError: the store holds no ``key``.
        """

    @abstractmethod
    def list_prefix(self, prefix: str) -> list[str]:
        """Return every key that starts with ``prefix`` ("" for all), sorted, at any depth."""

    @abstractmethod
    def list_dir(self, prefix: str) -> tuple[list[str], list[str]]:
        """Return the children of the directory ``prefix`` ("" for the root), each list sorted and relative to it.

        Returns:
            The names of the keys directly under ``prefix``, and the names of its sub-directories.
        """

    @abstractmethod
    def delete(self, key: str) -> None:
        """Delete ``key``; a missing key is fine."""

    def delete_prefix(self, prefix: str) -> int:
        """Delete every key that starts with ``prefix`` and return how many there were."""
        keys = self.list_prefix(prefix)
        for key in keys:
            self.delete(key)
        return len(keys)

    def usage(self, prefix: str = "") -> int:
        """Return the bytes stored under ``prefix`` ("" for all)."""
        return sum(self.size(key) for key in self.list_prefix(prefix))

    def move(self, source: str, target: str) -> bool:
        """Put ``source``'s value under ``target`` and delete ``source``; return False when ``source`` is missing.

        Idempotent, so a roll-forward after a crash may repeat it: once moved, a second call finds no ``source``. A
        local disk renames; an object store, which has no rename, copies and then deletes (a reader sees ``target``
        whole or not at all either way).
        """
        try:
            value = self.get(source)
        except StoreKeyNotFoundError:
            return False
        self.set(target, value)
        self.delete(source)
        return True

    def get_json(self, key: str, default: Any = StoreKeyNotFoundError) -> Any:
        """Return the decoded JSON value of ``key``, or ``default`` when the store holds no ``key`` (if given).

        Raises:
            StoreKeyNotFoundError: the store holds no ``key`` and no ``default`` was given.
            StorageError: the value is not valid UTF-8 JSON; the message names the key and the store.
        """
        try:
            raw = self.get(key)
        except StoreKeyNotFoundError:
            if default is StoreKeyNotFoundError:
                raise
            return default
        try:
            return json.loads(raw)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise StorageError(f"{key} in {self.url} is not valid JSON: {exc}") from exc

    def set_json(self, key: str, value: Any, *, indent: int | None = None) -> None:
        """Write ``value`` as JSON under ``key`` (values JSON cannot encode as ``str(value)``; non-ASCII text kept)."""
        self.set(key, json.dumps(value, indent=indent, default=str, ensure_ascii=False).encode("utf-8"))

    @abstractmethod
    def child(self, prefix: str) -> Store:
        """Return a view rooted at the directory ``prefix`` of this store: its key ``k`` is our ``prefix/k``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.url!r})"
