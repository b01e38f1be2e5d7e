"""Atomic file writes: write a temp file beside the target, fsync it, then rename over the target.

Readers either see the old file or the new one, never a half-written one. The temp file is named
``.<name>.tmp-<uuid hex>``: it starts with ``.`` and does not end in the target's suffix, so globs such
as ``*.parquet`` or ``*.jsonl`` never match it, even if a crash leaves it behind.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from engine.errors import StorageError

__all__ = [
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "atomic_writer",
    "read_json",
    "swap_write_json",
    "temp_path_for",
]

_MISSING: Any = object()


def temp_path_for(path: Path) -> Path:
    """Return a fresh temp-file path beside ``path``.

    Args:
        path: the file that will eventually be replaced.

    Returns:
        ``<dir>/.<name>.tmp-<uuid hex>``, unique per call.
    """
    return path.parent / f".{path.name}.tmp-{uuid.uuid4().hex}"


@contextlib.contextmanager
def atomic_writer(path: str | os.PathLike[str], *, durable: bool = True) -> Iterator[IO[bytes]]:
    """Open a binary temp file that replaces ``path`` when the block exits cleanly.

    Parent directories are created. If the block raises, the temp file is removed and ``path`` is
    left untouched.

    Args:
        path: the target file.
        durable: fsync before the rename (survives a machine crash, ~0.3 ms here). Without it the
            write is still atomic against a process crash, which is what per-agent files need.

    Yields:
        A binary file object open for writing.

    Raises:
        StorageError: the file system refused the write or the rename.
    """
    target = Path(path)
    tmp = temp_path_for(target)
    created = False
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(tmp, "wb") as fh:
            created = True
            yield fh
            fh.flush()
            if durable:
                os.fsync(fh.fileno())
        os.replace(tmp, target)
    except BaseException as exc:
        # BaseException on purpose: a cancelled task must not leave its temp file behind either.
        if created:
            with contextlib.suppress(FileNotFoundError):
                tmp.unlink()
        if isinstance(exc, OSError):
            raise StorageError(f"cannot write {target}: {exc}") from exc
        raise


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to ``path`` atomically.

    Args:
        path: the target file; parent directories are created.
        data: the full new content.

    Raises:
        StorageError: the file system refused the write.
    """
    with atomic_writer(path, durable=durable) as fh:
        fh.write(data)


def atomic_write_text(path: str | os.PathLike[str], text: str, *, durable: bool = True) -> None:
    """Write ``text`` as UTF-8 to ``path`` atomically.

    Args:
        path: the target file; parent directories are created.
        text: the full new content.

    Raises:
        StorageError: the file system refused the write.
    """
    atomic_write_bytes(path, text.encode("utf-8"), durable=durable)


def atomic_write_json(path: str | os.PathLike[str], obj: Any, *, indent: int | None = None, durable: bool = True) -> None:
    """Write ``obj`` as JSON to ``path`` atomically.

    Values JSON cannot encode are written as ``str(value)``; non-ASCII text is kept as is.

    Args:
        path: the target file; parent directories are created.
        obj: the value to encode.
        indent: passed to :func:`json.dumps`.
        durable: see :func:`atomic_writer`.

    Raises:
        StorageError: the file system refused the write.
    """
    atomic_write_text(path, json.dumps(obj, indent=indent, default=str, ensure_ascii=False), durable=durable)


def read_json(path: str | os.PathLike[str], default: Any = _MISSING) -> Any:
    """Read a JSON file.

    Args:
        path: the file to read.
        default: returned when the file does not exist. Without it a missing file is an error.

    Returns:
        The decoded value, or ``default``.

    Raises:
        StorageError: the file is missing (and no default was given), unreadable, or not valid JSON.
    """
    target = Path(path)
    try:
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        if default is _MISSING:
            raise StorageError(f"{target} does not exist") from exc
        return default
    except OSError as exc:
        raise StorageError(f"cannot read {target}: {exc}") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise StorageError(f"{target} is not valid JSON: {exc}") from exc


def swap_write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as JSON to a new version file and atomically point ``path`` (a symlink) at it.

    For files rewritten every tick (an agent's ``AGENT.json``). Replacing a regular file by rename
    makes ext4 flush the new file first (``auto_da_alloc``): ~1 ms per agent-step under load here,
    against ~0.07 ms for swapping a symlink. Readers open ``path`` as usual; a crash leaves either
    the old or the new version in place, plus at most one orphan version file (a hidden ``.v-`` file).

    Raises:
        StorageError: the file system refused the write.
    """
    target = Path(path)
    data = json.dumps(obj, default=str, ensure_ascii=False).encode("utf-8")
    # Named by content, so the directory looks the same on every rerun of a seeded run.
    version = target.parent / f".{target.name}.v-{hashlib.sha256(data).hexdigest()[:12]}"
    link = temp_path_for(target)
    try:
        previous = os.readlink(target) if target.is_symlink() else None
        if previous == version.name:
            return  # same content already in place
        with open(version, "wb") as fh:
            fh.write(data)
        os.symlink(version.name, link)
        os.replace(link, target)
    except OSError as exc:
        for leftover in (link, version):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        raise StorageError(f"cannot write {target}: {exc}") from exc
    if previous is not None and previous != version.name:
        with contextlib.suppress(FileNotFoundError):
            (target.parent / previous).unlink()
