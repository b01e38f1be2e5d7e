"""A store on any fsspec filesystem: S3 and other object stores, fsspec's memory filesystem."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import fsspec

from engine.errors import PolisError, StorageError, StoreKeyNotFoundError
from engine.storage.store.base import (
    Store,
    check_key,
    check_prefix,
    check_range,
    describe_error,
    dir_prefix,
    is_temp_name,
    redact_url,
)

__all__ = ["FsspecStore"]


class FsspecStore(Store):
    """Objects on an fsspec filesystem. Object stores have no rename: ``set`` is one whole-object write (atomic on S3).

    A missing object raises :class:`~engine.errors.StoreKeyNotFoundError`; any other error of the filesystem
    (botocore's, aiohttp's, ...) a :class:`~engine.errors.StorageError` naming the URL.

    Args:
        url: the store's root, e.g. ``s3://bucket/runs/r1`` or ``memory://scratch``.
        fs: the filesystem; made from ``url`` when omitted. Listings are refreshed before each use, but a
            filesystem shared by several writers should not cache them (s3fs: ``use_listings_cache=False``).
    """

    def __init__(self, url: str, fs: fsspec.AbstractFileSystem | None = None) -> None:
        if fs is None:
            fs, root = fsspec.core.url_to_fs(url)
        else:
            root = fs._strip_protocol(url)
        self._fs = fs
        self._root: str = root.rstrip("/")

    @property
    def url(self) -> str:
        return self._url_of(self._root)

    def _url_of(self, path: str) -> str:
        return redact_url(self._fs.unstrip_protocol(path))

    def _path(self, key: str) -> str:
        return f"{self._root}/{check_key(key)}"

    @contextlib.contextmanager
    def _errors(self, verb: str, path: str, key: str | None = None) -> Iterator[None]:
        """Turn the filesystem's errors into StorageError naming ``path``; a missing ``key`` into StoreKeyNotFoundError."""
        try:
            yield
        except PolisError:
            raise
        except FileNotFoundError as exc:
            if key is None:
                raise StorageError(f"cannot {verb} {self._url_of(path)}: {describe_error(exc)}") from exc
            raise StoreKeyNotFoundError(key, self.url) from exc
        except Exception as exc:  # each backend raises its own kinds: all of them are a StorageError here
            raise StorageError(f"cannot {verb} {self._url_of(path)}: {describe_error(exc)}") from exc

    def get(self, key: str) -> bytes:
        path = self._path(key)
        with self._errors("read", path, key):
            return bytes(self._fs.cat_file(path))

    def get_range(self, key: str, start: int, length: int) -> bytes:
        check_range(start, length)
        if length == 0:  # an empty range is no valid HTTP range: S3 would send the whole object
            self.size(key)
            return b""
        path = self._path(key)
        try:
            with self._errors("read", path, key):
                return bytes(self._fs.cat_file(path, start=start, end=start + length))
        except StoreKeyNotFoundError:
            raise
        except StorageError:
            if start >= self.size(key):  # S3 refuses a range past the end (416) where other stores return b""
                return b""
            raise

    def set(self, key: str, value: bytes) -> None:
        path = self._path(key)
        with self._errors("write", path):
            self._fs.pipe_file(path, bytes(value))

    def set_if_absent(self, key: str, value: bytes) -> bool:
        path = self._path(key)
        with self._errors("write", path):
            try:
                # A conditional put (S3's If-None-Match) where the filesystem has one, else check-then-write.
                self._fs.pipe_file(path, bytes(value), mode="create")
            except FileExistsError:
                return False
        return True

    def _info(self, key: str) -> dict[str, Any] | None:
        """The filesystem's fresh description of ``key``, or None when it holds no such object."""
        path = self._path(key)
        with self._errors("read", path):
            self._fs.invalidate_cache(path)
            try:
                info: dict[str, Any] = self._fs.info(path)
            except FileNotFoundError:
                return None
        return info if info.get("type") == "file" else None

    def exists(self, key: str) -> bool:
        return self._info(key) is not None

    def size(self, key: str) -> int:
        info = self._info(key)
        if info is None:
            raise StoreKeyNotFoundError(key, self.url)
        return int(info["size"])

    def list_prefix(self, prefix: str) -> list[str]:
        base = check_prefix(prefix).rpartition("/")[0]
        top = f"{self._root}/{base}" if base else self._root
        with self._errors("list", top):
            self._fs.invalidate_cache(top)
            paths = self._fs.find(top)
        cut = len(self._root) + 1
        keys = (path[cut:] for path in paths)
        return sorted(key for key in keys if key.startswith(prefix) and not is_temp_name(key.rpartition("/")[2]))

    def list_dir(self, prefix: str) -> tuple[list[str], list[str]]:
        top = f"{self._root}/{dir_prefix(prefix)}".rstrip("/")
        files: list[str] = []
        dirs: list[str] = []
        with self._errors("list", top):
            self._fs.invalidate_cache(top)
            try:
                entries = self._fs.ls(top, detail=True)
            except FileNotFoundError:
                return files, dirs
        for entry in entries:
            path = entry["name"].rstrip("/")
            name = path.rpartition("/")[2]
            if path != top and not is_temp_name(name):  # ls of a key's own path lists the key itself
                (dirs if entry["type"] == "directory" else files).append(name)
        return sorted(files), sorted(dirs)

    def usage(self, prefix: str = "") -> int:
        base = check_prefix(prefix).rpartition("/")[0]
        top = f"{self._root}/{base}" if base else self._root
        with self._errors("list", top):
            self._fs.invalidate_cache(top)
            try:
                found: dict[str, dict[str, Any]] = self._fs.find(top, detail=True)
            except FileNotFoundError:
                return 0
        cut = len(self._root) + 1
        return sum(int(info.get("size") or 0) for path, info in found.items()
                   if path[cut:].startswith(prefix) and info.get("type") != "directory")

    def delete(self, key: str) -> None:
        path = self._path(key)
        with self._errors("delete", path), contextlib.suppress(FileNotFoundError):
            self._fs.rm_file(path)

    def delete_prefix(self, prefix: str) -> int:
        keys = self.list_prefix(prefix)
        if not keys:
            return 0
        try:
            with self._errors("delete", self._root):
                self._fs.rm([self._path(key) for key in keys])  # S3: one request per 1,000 keys
        except StorageError as exc:
            if not isinstance(exc.__cause__, FileNotFoundError):
                raise
            for key in keys:  # one went away meanwhile: delete the others one by one
                self.delete(key)
        return len(keys)

    def child(self, prefix: str) -> FsspecStore:
        return FsspecStore(self._fs.unstrip_protocol(self._path(prefix.removesuffix("/"))), fs=self._fs)
