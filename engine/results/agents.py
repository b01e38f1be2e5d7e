"""One agent of a run: its profile and config, and its memory as of a step.

The memory comes from the ``agent_memory`` dataset through the engine's read-only ``ReplayReader``
(committed rows only); who the agent is comes from its workspace's ``config.json``, written once
when the run created it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.agent.workspace import AgentWorkspace
from engine.errors import AgentFileNotFoundError, AgentNotFoundError, ForkError, WorkspaceError
from engine.results.models import AgentFile, AgentFiles, AgentMemory
from engine.society.fork.as_of import agent_as_of
from engine.society.workspaces.manifest import agent_workspace
from engine.storage.query_limits import QueryLimits
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import REPLAY_DIR, run_store

__all__ = ["list_agent_files", "read_agent", "read_agent_file"]

_ROWS = "SELECT step, memory, todo, episodes FROM agent_memory WHERE agent_id = $agent{until} ORDER BY step"


def read_agent(experiment_id: str, run_dir: Path | str, agent_id: int, step: int | None, limits: QueryLimits | None = None) -> AgentMemory:
    """One agent's profile and config, and its memory as of ``step``.

    Args:
        experiment_id: the experiment, for error messages.
        run_dir: its run directory.
        agent_id: the agent.
        step: the society step (None: the agent's last committed one). Memory and TODO are those of
            the last row at or before it; episodes are every one stored up to it.
        limits: the reader's query limits.

    Raises:
        AgentNotFoundError: the run has no such agent.
        WorkspaceError: the agent's ``config.json`` is corrupt.
        QueryError: the ``agent_memory`` shards cannot be read, or reading them ran past the limits.
    """
    workspace = agent_workspace(run_dir, agent_id)
    if workspace is None:
        raise AgentNotFoundError(experiment_id, agent_id)
    config: dict[str, Any] = workspace.read_json("config.json")
    rows: list[dict[str, Any]] = []
    if run_store(run_dir).list_dir(REPLAY_DIR) != ([], []):
        with ReplayReader(run_dir, limits) as reader:
            if "agent_memory" in reader.datasets():
                params: dict[str, Any] = {"agent": agent_id} if step is None else {"agent": agent_id, "step": step}
                rows = reader.query(_ROWS.format(until="" if step is None else " AND step <= $step"), params).to_pylist()
    last = rows[-1] if rows else None
    return AgentMemory(
        experiment_id=experiment_id,
        agent_id=agent_id,
        step=step if step is not None else (last["step"] if last else 0),
        type=str(config.get("type", "")),
        profile=config.get("profile", {}),
        config=config.get("config", {}),
        memory=last["memory"] if last else None,
        todo=json.loads(last["todo"]) if last and last["todo"] is not None else None,
        episodes=[episode for row in rows for episode in json.loads(row["episodes"] or "[]")],
    )


def _workspace(experiment_id: str, run_dir: Path | str, agent_id: int, step: int | None) -> AgentWorkspace:
    if agent_workspace(run_dir, agent_id) is None:
        raise AgentNotFoundError(experiment_id, agent_id)
    return agent_as_of(run_dir, agent_id, step)  # ForkError (409) when the tick is not kept


def list_agent_files(experiment_id: str, run_dir: Path | str, agent_id: int, step: int | None) -> AgentFiles:
    """Every file of the agent's workspace (packed or a folder), as the run stands or as kept tick ``step`` left it.

    Raises:
        AgentNotFoundError: the run has no such agent.
        ForkError: ``step`` is a tick the run does not keep.
        SpecError: ``step`` is after the run's committed ticks.
    """
    workspace = _workspace(experiment_id, run_dir, agent_id, step)
    files = [AgentFile(path=path, size=workspace.size(path)) for path in workspace.files() if not path.startswith(_HIDDEN)]
    return AgentFiles(experiment_id=experiment_id, agent_id=agent_id, step=step, files=files)


def read_agent_file(experiment_id: str, run_dir: Path | str, agent_id: int, path: str, step: int | None) -> bytes:
    """One file of the agent's workspace (see :func:`list_agent_files`).

    Raises:
        AgentNotFoundError: the run has no such agent.
        AgentFileNotFoundError: no such file, or a path that leaves the workspace.
    """
    workspace = _workspace(experiment_id, run_dir, agent_id, step)
    if path.startswith(_HIDDEN):
        raise AgentFileNotFoundError(experiment_id, agent_id, path)
    try:
        return workspace.read_bytes(workspace.resolve(path))
    except (OSError, WorkspaceError, ForkError):
        raise AgentFileNotFoundError(experiment_id, agent_id, path) from None


#: A folder run's step journals: runtime bookkeeping, not the agent's files.
_HIDDEN = ".runtime/txn/"
