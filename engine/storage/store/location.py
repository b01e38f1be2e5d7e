"""From a location (a path or a URL) to a store, and the probe that shows it can be used."""

from __future__ import annotations

import os
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

import fsspec
from fsspec.registry import known_implementations

from engine.errors import StorageError, StoreUnavailableError, StoreUrlError
from engine.storage.store.base import Store, describe_error, redact_url
from engine.storage.store.fsspec_store import FsspecStore
from engine.storage.store.local import LocalStore

__all__ = ["SUPPORTED_SCHEMES", "check_store", "open_store"]

#: The schemes :func:`open_store` names when it refuses one (any other installed fsspec protocol works too).
SUPPORTED_SCHEMES = "file, memory, s3"
#: Options of the filesystems :func:`open_store` makes, by protocol. S3 listings are never cached (another worker
#: may have written since), and each store gets its own s3fs instance, which reads the AWS environment of its
#: own time (s3fs caches instances by their arguments, not by the environment they read).
_FS_OPTIONS: dict[str, dict[str, Any]] = {
    protocol: {"use_listings_cache": False, "skip_instance_cache": True, "default_cache_type": "all"} for protocol in ("s3", "s3a")
}


def _file_url_path(location: str) -> Path:
    parts = urllib.parse.urlsplit(location)
    if parts.netloc not in ("", "localhost") or not parts.path:
        raise StoreUrlError(f"{redact_url(location)}: a file URL names a local path (file:///dir/run), not a host")
    return Path(urllib.parse.unquote(parts.path))


def open_store(location: str | os.PathLike[str]) -> Store:
    """Return the store at ``location``; nothing is read or written yet (see :func:`check_store`).

    Args:
        location: a local path or ``file://`` URL (a :class:`LocalStore`), or a URL of an installed fsspec
            protocol such as ``memory://name`` or ``s3://bucket/prefix`` (a :class:`FsspecStore`). S3 reads the
            standard AWS environment (``AWS_ACCESS_KEY_ID``, ``AWS_ENDPOINT_URL``, ...) through botocore.

    Returns:
        The store.

    Raises:
        StoreUrlError: the scheme is unknown, or the package of its fsspec implementation is not installed.
    """
    if not isinstance(location, str):
        return LocalStore(location)
    scheme, sep, _ = location.partition("://")
    if not sep:
        return LocalStore(location)
    protocol = scheme.lower()
    location = protocol + location[len(scheme) :]  # fsspec knows its protocols in lower case only
    if protocol == "file":
        return LocalStore(_file_url_path(location))
    shown = redact_url(location)
    try:
        fsspec.get_filesystem_class(protocol)
    except ValueError as exc:
        raise StoreUrlError(f"{shown}: unknown storage scheme {scheme!r}; supported: {SUPPORTED_SCHEMES}") from exc
    except ImportError as exc:
        package = known_implementations.get(protocol, {}).get("class", protocol).partition(".")[0]
        raise StoreUrlError(f"{shown}: the {protocol!r} scheme needs a package that is not installed: pip install {package}") from exc
    try:
        fs, _ = fsspec.core.url_to_fs(location, **_FS_OPTIONS.get(protocol, {}))
    except Exception as exc:  # whatever the filesystem's constructor refuses (a malformed URL, a bad option)
        raise StoreUrlError(f"{shown}: cannot open: {describe_error(exc)}") from exc
    return FsspecStore(location, fs=fs)


def check_store(store: Store) -> None:
    """Probe ``store`` before a run: write a small key (``.polis-probe-<hex>``), read it back, delete it.

    Raises:
        StoreUnavailableError: a step failed (a missing bucket, missing credentials, a read-only disk); the message
            names the store and the cause. The probe key is deleted whenever it was written.
    """
    key = f".polis-probe-{uuid.uuid4().hex}"
    payload = f"polis store probe {key}".encode()
    try:
        store.set(key, payload)
        try:
            echoed = store.get(key)
        finally:
            store.delete(key)
    except StorageError as exc:
        raise StoreUnavailableError(f"store {store.url} is unavailable: {exc}") from exc
    if echoed != payload:
        raise StoreUnavailableError(f"store {store.url} is unavailable: the probe read back other bytes than it wrote")
