"""Staged keys: a transaction's replay and trace shards and artifacts, invisible until the transaction commits.

A writer inside transaction ``txn`` writes the key ``<name>.parquet`` as ``<name>.parquet.staged-<txn>``; readers
match ``*.parquet`` / ``*.jsonl`` and so never see it. The driver commits the transaction by recording ``txn`` as
committed (``SOCIETY_STEP.json``) and then moving its staged keys into place (:meth:`Store.move`: a rename on disk,
a copy and delete on an object store). A crash between the two is repaired by :func:`recover_staged`, which rolls
committed transactions forward and deletes everything staged by transactions that never committed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from engine.storage.store import Store

__all__ = ["commit_staged", "recover_staged", "staged_key", "staged_txn"]

_STAGED = re.compile(r"^(?P<final>.+)\.staged-(?P<txn>\d{6,})$")


def staged_key(final: str, txn: int) -> str:
    """The key a value that becomes ``final`` when transaction ``txn`` commits is written under."""
    return f"{final}.staged-{txn:06d}"


def staged_txn(key: str) -> tuple[str, int] | None:
    """``(final key, txn)`` for a staged key, None for anything else."""
    match = _STAGED.match(key)
    return (match["final"], int(match["txn"])) if match else None


def commit_staged(store: Store, keys: Iterable[str]) -> int:
    """Move staged keys into place (idempotent: ones already moved are skipped); returns how many moved."""
    moved = 0
    for key in keys:
        parsed = staged_txn(key)
        if parsed is not None and store.move(key, parsed[0]):
            moved += 1
    return moved


def recover_staged(store: Store, prefixes: Iterable[str], committed_txn: int) -> tuple[int, int]:
    """Settle every staged key under ``prefixes``: commit those of transactions ``<= committed_txn``, delete the rest.

    Returns:
        ``(committed, deleted)`` key counts.
    """
    forward: list[str] = []
    deleted = 0
    for prefix in prefixes:
        for key in store.list_prefix(prefix):
            parsed = staged_txn(key)
            if parsed is None:
                continue
            if parsed[1] <= committed_txn:
                forward.append(key)
            else:
                store.delete(key)
                deleted += 1
    return commit_staged(store, forward), deleted
