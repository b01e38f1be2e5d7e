"""The run's history: one record per committed transaction, so that the state of any kept tick can be found again.

``history/txn_<n>.json`` holds what transaction ``n`` committed: its kind (``tick`` or ``step``), the
``SocietyStep`` it made durable and the files it published (relative to the run directory). A record
is written just before its commit point; a record of a transaction above the committed ``txn`` is
the leftover of an attempt that never committed and is ignored (the next attempt overwrites it).

What the records point at is kept under the spec's ``snapshots.keep``: the agents' step journals
(:class:`~engine.agent.journal.StepJournal`: the journal of tick ``k + 1`` is the workspace as tick
``k`` left it) and the env snapshot each tick committed. Forks (:mod:`engine.society.fork`) and
``as_of_step`` interviews read them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from engine.agent.journal import StepJournal
from engine.agent.workspace import workspace_path
from engine.errors import ForkError
from engine.society.status import SocietyStep, society_step_from_json
from engine.storage.run_layout import HISTORY_DIR, RunLayout, RunLocation, history_key, run_store
from engine.storage.staging import staged_txn

__all__ = ["TICK", "History", "KeptTicks", "TxnRecord", "forget_journals", "journals_to_discard", "kept_from"]

TICK = "tick"  #: the kind of a tick's transaction; questionnaire, ask and intervene steps are ``step``


@dataclass(frozen=True)
class TxnRecord:
    """What one committed transaction left."""

    txn: int
    kind: str  #: ``tick`` or ``step``
    status: SocietyStep  #: the status it committed
    files: tuple[str, ...]  #: published keys of the run's store

    @property
    def step(self) -> int:
        """The tick count once it committed."""
        return self.status.step_count


def kept_from(step_count: int, keep: int | None) -> int:
    """The oldest tick still recoverable when ``step_count`` ticks are committed under ``snapshots.keep``."""
    return 0 if keep is None else max(0, step_count - keep)


def journals_to_discard(step: int, keep: int | None) -> int | None:
    """Before an agent steps tick ``step``: discard its journals of ticks ``<=`` this (None: keep all).

    The journal of tick ``j`` is the state of tick ``j - 1``, so tick ``k`` stays recoverable while
    the journal of ``k + 1`` is kept."""
    return None if keep is None else kept_from(step - 1, keep)


class History:
    """The ``history/`` records of one run."""

    def __init__(self, run_dir: RunLocation) -> None:
        self.run_dir = run_dir
        self.store = run_store(run_dir)

    def record(self, status: SocietyStep, kind: str, staged: Iterable[str]) -> None:
        """Record transaction ``status.txn`` before it commits (``staged``: the keys it will publish)."""
        files = []
        for key in staged:
            parsed = staged_txn(key)
            files.append(parsed[0] if parsed else key)
        self.store.set_json(history_key(status.txn), {"txn": status.txn, "kind": kind, "status": asdict(status), "files": sorted(files)})

    def records(self, through_txn: int) -> list[TxnRecord]:
        """Every committed transaction's record up to ``through_txn``, oldest first."""
        found: list[TxnRecord] = []
        for name in self.store.list_dir(HISTORY_DIR)[0]:
            if not (name.startswith("txn_") and name.endswith(".json")):
                continue
            txn = int(name[4:-5])
            if txn > through_txn:
                continue
            data = self.store.get_json(f"{HISTORY_DIR}/{name}")
            found.append(TxnRecord(txn, data["kind"], society_step_from_json(data["status"]), tuple(data["files"])))
        return found

    def tick(self, step: int, through_txn: int) -> TxnRecord:
        """The record of the transaction that committed tick ``step`` (tick 0: the run before its first transaction).

        Raises:
            ForkError: the run has no record of that tick.
        """
        for record in reversed(self.records(through_txn)):
            if record.kind == TICK and record.step == step:
                return record
        raise ForkError(f"{self.run_dir} has no history record of tick {step} (a run started before Polis kept history, "
                       f"or a tick it never committed)")



def forget_journals(run_dir: Path, agent_ids: Iterable[int], step_count: int, keep: int | None) -> None:
    """At a run's end: drop the agents' journals of ticks ``keep`` does not keep (None: drop none)."""
    if keep is None:
        return
    root, through = RunLayout(run_dir).agents, kept_from(step_count, keep)
    for agent_id in agent_ids:
        StepJournal(workspace_path(root, agent_id)).discard_through(through)


class KeptTicks:
    """The env snapshots of the ticks a run keeps (the driver's view; see :meth:`protected`)."""

    def __init__(self, keep: int | None) -> None:
        self.keep = keep
        self._snapshots: dict[int, str] = {}

    def load(self, run_dir: RunLocation, txn: int) -> None:
        """Read the ticks committed so far from the history."""
        self._snapshots = {r.step: r.status.env_snapshot for r in History(run_dir).records(txn)
                           if r.kind == TICK and r.status.env_snapshot is not None}

    def protected(self, status: SocietyStep, kind: str) -> set[str]:
        """The snapshots to keep once ``status`` commits (a ``kind`` transaction)."""
        if kind == TICK and status.env_snapshot is not None:
            self._snapshots[status.step_count] = status.env_snapshot
        oldest = kept_from(status.step_count, self.keep)
        self._snapshots = {tick: name for tick, name in self._snapshots.items() if tick >= oldest}
        return set(self._snapshots.values())
