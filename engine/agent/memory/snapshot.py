"""What an agent remembers at the end of a step, read from its workspace: one ``agent_memory`` row.

The row holds ``AGENT_MEMORY.md``, the TODO list (``state/todo.json``) and the episodes the step
appended to ``memory/episodes.jsonl``. Those are found by the file's size before the step
(:func:`episodes_offset`): the file is append-only and a rolled-back step truncates it back to that
size, so the bytes past the offset are exactly this step's episodes.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from engine.agent.memory.episodes import EPISODES_FILE, Episode
from engine.agent.memory.thread import MEMORY_FILE
from engine.agent.toolsets.todo import TODO_FILE
from engine.agent.workspace import AgentWorkspace

__all__ = ["episodes_offset", "memory_snapshot"]


def episodes_offset(workspace: AgentWorkspace) -> int:
    """The size of the workspace's episode file now (0: none yet), where the next step's episodes start."""
    return workspace.size(EPISODES_FILE)


def memory_snapshot(workspace: AgentWorkspace, episodes_from: int) -> dict[str, Any]:
    """The agent's memory as its workspace holds it now.

    Args:
        workspace: the agent's workspace.
        episodes_from: :func:`episodes_offset` before the step.

    Returns:
        ``{"memory": text or None, "todo": the TODO list or None, "episodes": [episode dicts]}``.

    Raises:
        OSError: a file exists but cannot be read.
        ValueError: ``state/todo.json`` is not JSON.
    """
    return {
        "memory": workspace.read_text(MEMORY_FILE) if workspace.is_file(MEMORY_FILE) else None,
        "todo": json.loads(workspace.read_bytes(TODO_FILE)) if workspace.is_file(TODO_FILE) else None,
        "episodes": _episodes_after(workspace, episodes_from),
    }


def _episodes_after(workspace: AgentWorkspace, offset: int) -> list[dict[str, Any]]:
    if not workspace.is_file(EPISODES_FILE):
        return []
    tail = workspace.read_bytes(EPISODES_FILE)[offset:].decode("utf-8", errors="replace")
    episodes = []
    for line in tail.splitlines():
        if line.strip():
            try:  # a torn last line (a crash mid-append) is skipped, as EpisodeStore.all does
                episodes.append(Episode.model_validate(json.loads(line)).model_dump(mode="json"))
            except (json.JSONDecodeError, ValidationError):
                continue
    return episodes
