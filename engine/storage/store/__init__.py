"""One storage interface: a flat key/value store of bytes, on local disk, in this process, or on any fsspec filesystem.

Format writers talk to :class:`Store`, never to ``os``, so one layout lives in a local directory
(:class:`LocalStore`), in memory (:class:`MemoryStore`, the shipped fake) or in object storage such as S3
(:class:`FsspecStore`). Keys are relative POSIX paths (``packs/000003-0001.pack``); directories are implicit.
Object stores have no rename, so :meth:`Store.set` is one whole-object write. :func:`open_store` turns a location
(a path or a URL) into a store; :func:`check_store` probes one before a run.

::

    base.py          the contract: Store, and the rules of a key
    local.py         LocalStore: files under a directory, written by temp file and rename
    memory.py        MemoryStore: a dict of this process
    fsspec_store.py  FsspecStore: any fsspec filesystem (s3://, memory://)
    location.py      open_store (a path or URL to a store), check_store (the preflight probe)
    tree.py          put_tree / get_tree: a local folder in and out of the keys under a prefix; copy_keys
"""

from __future__ import annotations

from engine.storage.store.base import Store
from engine.storage.store.fsspec_store import FsspecStore
from engine.storage.store.local import LocalStore
from engine.storage.store.location import SUPPORTED_SCHEMES, check_store, open_store
from engine.storage.store.memory import MemoryStore
from engine.storage.store.tree import copy_keys, get_tree, put_tree

__all__ = [
    "SUPPORTED_SCHEMES",
    "FsspecStore",
    "LocalStore",
    "MemoryStore",
    "Store",
    "check_store",
    "copy_keys",
    "get_tree",
    "open_store",
    "put_tree",
]
