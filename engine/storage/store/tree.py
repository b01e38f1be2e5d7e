"""Keys in bulk: a local folder in and out of a store (for code that can only write a directory, such as env
modules' snapshots), and keys copied from one store to another (a fork's shared past).

This is the one place where a store's keys meet a local folder's files; the folder is the caller's scratch,
never a run's data.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from engine.errors import StoreKeyNotFoundError
from engine.storage.store.base import Store, check_key, dir_prefix

__all__ = ["copy_keys", "get_tree", "put_tree"]


def put_tree(store: Store, prefix: str, directory: str | os.PathLike[str]) -> int:
    """Make the keys under ``prefix`` the files under ``directory`` (keys there before are deleted first).

    Returns:
        How many files were stored.
    """
    base = dir_prefix(prefix)
    store.delete_prefix(base)
    root = Path(directory)
    written = 0
    for folder, _, names in os.walk(root):
        for name in sorted(names):
            path = Path(folder) / name
            store.set(base + path.relative_to(root).as_posix(), path.read_bytes())
            written += 1
    return written


def get_tree(store: Store, prefix: str, directory: str | os.PathLike[str]) -> int:
    """Write every key under ``prefix`` as a file under ``directory`` (made when missing).

    Returns:
        How many files were written.
    """
    base = dir_prefix(prefix)
    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)
    keys = store.list_prefix(base)
    for key in keys:
        path = root / key[len(base) :]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(store.get(key))
    return len(keys)


def copy_keys(source: Store, target: Store, keys: Iterable[str]) -> int:
    """Copy ``keys`` of ``source`` to the same keys of ``target``; keys ``source`` lacks are skipped.

    Only for values nobody rewrites in place (packs, published shards, history records): between two local stores
    a key is hard-linked, so the copy costs no bytes (a copy where the disks differ or links are refused);
    anything else is read and written.

    Returns:
        How many keys were copied.
    """
    copied = 0
    source_root, target_root = source.local_root, target.local_root
    for key in keys:
        if source_root is not None and target_root is not None:
            origin, destination = source_root / check_key(key), target_root / check_key(key)
            if not origin.is_file():
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            with contextlib.suppress(FileNotFoundError):
                destination.unlink()
            try:
                os.link(origin, destination)
            except OSError:
                shutil.copy2(origin, destination)
        else:
            try:
                value = source.get(key)
            except StoreKeyNotFoundError:
                continue
            target.set(key, value)
        copied += 1
    return copied
