"""Committing and recovering society transactions (one per tick or non-run top-level step).

A transaction's effects are staged while it runs: replay and trace shards as ``*.staged-<txn>``
files, the env state as snapshot ``env/_snapshots/txn_<txn>``, agent workspaces in packs that the
transaction's workspace manifest names (or, on ``dir`` runs, under their step journals). :func:`commit` makes it durable in one atomic write of ``SOCIETY_STEP.json`` (the commit
point) and then publishes the staged files; :func:`recover` repairs a run directory after a crash,
so a transaction is either committed everywhere or re-run from the state before it.
"""

from __future__ import annotations

import shutil
from collections.abc import Collection, Iterable
from pathlib import Path

from engine.failpoints import failpoint
from engine.society.history import History
from engine.society.status import SocietyStep, write_society_step
from engine.society.workspaces.manifest import drop_uncommitted, run_store
from engine.storage.run_layout import RunLayout
from engine.storage.staging import commit_staged, recover_staged

__all__ = ["commit", "recover", "staged_roots"]


def staged_roots(run_dir: Path) -> list[Path]:
    """Where staged files can be."""
    return list(RunLayout(run_dir).staged_roots)


def commit(run_dir: Path, status: SocietyStep, staged: Iterable[str | Path], *, kind: str = "step",
           keep_snapshots: Collection[str] = ()) -> None:
    """Commit transaction ``status.txn``: record it in the history, write the status (the commit
    point), publish staged files, and drop env snapshots older than the one just committed except
    ``keep_snapshots`` (those of the ticks the run keeps recoverable)."""
    staged = list(staged)
    History(run_dir).record(status, kind, staged)
    write_society_step(run_dir, status)
    failpoint("after_commit", txn=status.txn)
    commit_staged(Path(p) for p in staged)
    _prune_snapshots(run_dir, status.env_snapshot, keep_snapshots)


def recover(run_dir: Path, status: SocietyStep) -> tuple[int, int]:
    """Roll committed transactions forward and delete what uncommitted ones staged.

    Returns:
        ``(files committed, files deleted)``.
    """
    committed, deleted = recover_staged(staged_roots(run_dir), status.txn)
    return committed, deleted + drop_uncommitted(run_store(run_dir), status.txn)


def _prune_snapshots(run_dir: Path, keep: str | None, kept: Collection[str]) -> None:
    root = RunLayout(run_dir).env_snapshots
    if keep is None or not root.is_dir():
        return
    for entry in root.iterdir():
        # Names sort by transaction. Right after a commit no snapshot is being written, so hidden
        # temp directories are leftovers of a crashed write.
        if entry.name.startswith(".") or (entry.name != keep and entry.name < keep and entry.name not in kept):
            shutil.rmtree(entry, ignore_errors=True)
