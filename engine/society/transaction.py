"""Committing and recovering society transactions (one per tick or non-run top-level step).

A transaction's effects are staged while it runs: replay and trace shards as ``*.staged-<txn>``
files, the env state as snapshot ``env/_snapshots/txn_<txn>``, agent workspaces in packs that the
transaction's workspace manifest names (or, on ``dir`` runs, under their step journals). :func:`commit` makes it durable in one atomic write of ``SOCIETY_STEP.json`` (the commit
point) and then publishes the staged files; :func:`recover` repairs a run directory after a crash,
so a transaction is either committed everywhere or re-run from the state before it.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from engine.failpoints import failpoint
from engine.society.history import History
from engine.society.status import SocietyStep, write_society_step
from engine.society.workspaces.manifest import drop_uncommitted
from engine.storage.run_layout import ENV_SNAPSHOTS_DIR, STAGED_PREFIXES, RunLocation, run_store
from engine.storage.staging import commit_staged, recover_staged

__all__ = ["commit", "recover"]


def commit(run_dir: RunLocation, status: SocietyStep, staged: Iterable[str], *, kind: str = "step",
           keep_snapshots: Collection[str] = ()) -> None:
    """Commit transaction ``status.txn``: record it in the history, write the status (the commit
    point), publish the staged keys, and drop env snapshots older than the one just committed except
    ``keep_snapshots`` (those of the ticks the run keeps recoverable)."""
    staged = list(staged)
    History(run_dir).record(status, kind, staged)
    write_society_step(run_dir, status)
    failpoint("after_commit", txn=status.txn)
    commit_staged(run_store(run_dir), staged)
    _prune_snapshots(run_dir, status.env_snapshot, keep_snapshots)


def recover(run_dir: RunLocation, status: SocietyStep) -> tuple[int, int]:
    """Roll committed transactions forward and delete what uncommitted ones staged.

    Returns:
        ``(keys committed, keys deleted)``.
    """
    store = run_store(run_dir)
    committed, deleted = recover_staged(store, STAGED_PREFIXES, status.txn)
    return committed, deleted + drop_uncommitted(store, status.txn)


def _prune_snapshots(run_dir: RunLocation, keep: str | None, kept: Collection[str]) -> None:
    if keep is None:
        return
    store = run_store(run_dir)
    for name in store.list_dir(ENV_SNAPSHOTS_DIR)[1]:
        # Names sort by transaction.
        if name != keep and name < keep and name not in kept:
            store.delete_prefix(f"{ENV_SNAPSHOTS_DIR}/{name}/")
