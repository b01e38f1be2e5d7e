"""The run's status files: ``SOCIETY.json`` (written once) and ``SOCIETY_STEP.json`` (every tick)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from engine.run_status import RunStatus
from engine.storage.run_layout import SOCIETY_FILE, SOCIETY_STEP_FILE, RunLocation, run_store
from engine.storage.store import Store

__all__ = ["SocietyStep", "has_society_step", "read_society", "read_society_step", "society_step_from_json", "write_society", "write_society_step"]


@dataclass
class SocietyStep:
    """The small per-tick record of where a run is."""

    current_time: datetime
    step_count: int = 0
    completed_steps: int = 0  #: top-level spec steps completed
    agent_steps_done: int = 0
    status: RunStatus = RunStatus.RUNNING  #: running | completed(_with_errors) | failed | cancelled | budget_exhausted
    error: str | None = None
    txn: int = 0  #: transactions committed (ticks and non-run top-level steps)
    env_snapshot: str | None = None  #: the env state snapshot the last committed transaction wrote
    workspaces: str | None = None  #: packed runs: the workspace manifest the last committed transaction wrote
    updated_at: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def write_society(run_dir: RunLocation | Store, content: dict[str, Any]) -> None:
    """Write ``SOCIETY.json`` once (immutable: specs, env module types and kwargs, spec hash)."""
    store = run_store(run_dir)
    if not store.exists(SOCIETY_FILE):
        store.set_json(SOCIETY_FILE, content, indent=2)


def read_society(run_dir: RunLocation | Store) -> dict[str, Any] | None:
    """``SOCIETY.json``, or None before a run wrote it."""
    found: dict[str, Any] | None = run_store(run_dir).get_json(SOCIETY_FILE, None)
    return found


def has_society_step(run_dir: RunLocation | Store) -> bool:
    """Whether the run committed a transaction (``SOCIETY_STEP.json`` exists)."""
    return run_store(run_dir).exists(SOCIETY_STEP_FILE)


def write_society_step(run_dir: RunLocation | Store, step: SocietyStep) -> None:
    """Write ``SOCIETY_STEP.json``: the commit point of transaction ``step.txn``."""
    run_store(run_dir).set_json(SOCIETY_STEP_FILE, asdict(step), indent=2)


def read_society_step(run_dir: RunLocation | Store) -> SocietyStep | None:
    """Where the run stands, or None before its first commit."""
    data = run_store(run_dir).get_json(SOCIETY_STEP_FILE, None)
    return None if data is None else society_step_from_json(data)


def society_step_from_json(data: dict[str, Any]) -> SocietyStep:
    """A :class:`SocietyStep` from its JSON form (``asdict`` after a JSON round trip)."""
    return SocietyStep(**{**data, "current_time": datetime.fromisoformat(data["current_time"]), "status": RunStatus(data["status"])})
