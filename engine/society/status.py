"""The run's status files: ``SOCIETY.json`` (written once) and ``SOCIETY_STEP.json`` (every tick)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.run_status import RunStatus
from engine.storage.atomic import atomic_write_json, read_json
from engine.storage.run_layout import RunLayout

__all__ = ["SocietyStep", "read_society_step", "society_step_from_json", "write_society", "write_society_step"]


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


def write_society(run_dir: Path, content: dict[str, Any]) -> None:
    """Write ``SOCIETY.json`` once (immutable: specs, env module types and kwargs, spec hash)."""
    path = RunLayout(run_dir).society_file
    if not path.exists():
        atomic_write_json(path, content, indent=2)


def write_society_step(run_dir: Path, step: SocietyStep) -> None:
    atomic_write_json(RunLayout(run_dir).society_step_file, asdict(step), indent=2)


def read_society_step(run_dir: Path) -> SocietyStep | None:
    data = read_json(RunLayout(run_dir).society_step_file, default=None)
    return None if data is None else society_step_from_json(data)


def society_step_from_json(data: dict[str, Any]) -> SocietyStep:
    """A :class:`SocietyStep` from its JSON form (``asdict`` after a JSON round trip)."""
    return SocietyStep(**{**data, "current_time": datetime.fromisoformat(data["current_time"]), "status": RunStatus(data["status"])})
