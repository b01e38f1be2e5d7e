"""An agent's workspace: the only persistent state of an agent (``run_dir/agents/agent_XXXX/``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.errors import WorkspaceError
from engine.storage.atomic import atomic_write_json, swap_write_json

__all__ = ["AgentWorkspace", "workspace_path"]

_DIRS = ("state", "memory", "custom/skills", ".runtime/logs")


def workspace_path(agents_root: Path, agent_id: int) -> Path:
    """``agents_root/agent_0007`` (at least four digits, sorting by id)."""
    return agents_root / f"agent_{agent_id:04d}"


class AgentWorkspace:
    """Paths and I/O of one agent workspace. Whole-file writes are atomic.

    Args:
        root: the workspace directory.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)

    @property
    def config_file(self) -> Path:
        return self.root / "config.json"

    @property
    def agent_file(self) -> Path:
        return self.root / "AGENT.json"

    @property
    def logs(self) -> Path:
        return self.root / ".runtime" / "logs"

    def make_dirs(self) -> None:
        for sub in _DIRS:
            (self.root / sub).mkdir(parents=True, exist_ok=True)

    def read_json(self, relative: str) -> Any:
        """Read a JSON file of the workspace.

        Raises:
            WorkspaceError: missing or corrupt.
        """
        path = self.root / relative
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise WorkspaceError(f"{path} does not exist") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise WorkspaceError(f"{path} is corrupt: {error}") from None

    def write_json(self, relative: str, value: Any) -> None:
        # Atomic against a process crash (rename); no fsync: one per agent per tick costs more
        # than the rest of the agent-step, and run-level files keep theirs.
        atomic_write_json(self.root / relative, value, durable=False)

    def swap_json(self, relative: str, value: Any) -> None:
        """Rewrite a file that changes every step (``AGENT.json``) by symlink swap (see ``swap_write_json``)."""
        swap_write_json(self.root / relative, value)

    def append_jsonl(self, relative: str, records: list[dict[str, Any]]) -> None:
        """Append records to a log (one write call, so a crash loses at most the tail line)."""
        if not records:
            return
        path = self.root / relative
        text = "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records)
        with open(path, "a", encoding="utf-8") as handle:
            handle.write(text)
