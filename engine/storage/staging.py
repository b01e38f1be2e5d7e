"""Staged shards: a transaction's replay and trace files, invisible until the transaction commits.

A writer inside transaction ``txn`` writes ``<name>.parquet`` as ``<name>.parquet.staged-<txn>``;
readers glob ``*.parquet`` / ``*.jsonl`` and so never see it. The driver commits the transaction by
recording ``txn`` as committed (``SOCIETY_STEP.json``) and then renaming its staged files into
place. A crash between the two is repaired by :func:`recover_staged`, which rolls committed
transactions forward and deletes everything staged by transactions that never committed.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Iterable
from pathlib import Path

__all__ = ["commit_staged", "recover_staged", "staged_path", "staged_txn"]

_STAGED = re.compile(r"^(?P<final>.+)\.staged-(?P<txn>\d{6,})$")


def staged_path(final: Path, txn: int) -> Path:
    """Where a file that becomes ``final`` when transaction ``txn`` commits is written."""
    return final.with_name(f"{final.name}.staged-{txn:06d}")


def staged_txn(path: Path) -> tuple[Path, int] | None:
    """``(final path, txn)`` for a staged file, None for anything else."""
    match = _STAGED.match(path.name)
    return (path.with_name(match["final"]), int(match["txn"])) if match else None


def commit_staged(paths: Iterable[Path]) -> int:
    """Rename staged files into place (idempotent: ones already renamed are skipped); returns how many moved."""
    moved = 0
    for path in paths:
        parsed = staged_txn(Path(path))
        if parsed is None:
            continue
        with contextlib.suppress(FileNotFoundError):
            os.replace(path, parsed[0])
            moved += 1
    return moved


def recover_staged(roots: Iterable[Path], committed_txn: int) -> tuple[int, int]:
    """Settle every staged file under ``roots``: commit those of transactions ``<= committed_txn``, delete the rest.

    Returns:
        ``(committed, deleted)`` file counts.
    """
    forward: list[Path] = []
    deleted = 0
    for root in roots:
        if not Path(root).is_dir():
            continue
        for directory, _, names in os.walk(root):
            for name in names:
                path = Path(directory) / name
                parsed = staged_txn(path)
                if parsed is None:
                    continue
                if parsed[1] <= committed_txn:
                    forward.append(path)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        path.unlink()
                    deleted += 1
    return commit_staged(forward), deleted
