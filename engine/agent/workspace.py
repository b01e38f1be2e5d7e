"""An agent's workspace: the only persistent state of an agent, as a small file tree.

Everything an agent does to its state (its file tools, memory, TODO list, skills and logs) goes
through :class:`AgentWorkspace`, whatever holds the files:

- :class:`~engine.agent.workspace_in_memory.MemoryWorkspace`: the files in memory, loaded (lazily) from the run store when a batch
  restores the agent; what changed is read back and packed.
- :class:`DirWorkspace`: a directory on local disk (today's AS2 layout, ``agents/agent_0007/``),
  for exports and inspection.

Paths are relative POSIX paths (``state/todo.json``). A path that names nothing raises
:class:`FileNotFoundError`, a folder where a file is wanted :class:`IsADirectoryError`, as the
operating system would, so callers handle both kinds alike. Folders exist implicitly above every
file; :meth:`AgentWorkspace.make_dirs` makes the empty ones a fresh workspace has.
"""

from __future__ import annotations

import errno
import json
import os
import stat as stat_module
from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from engine.errors import WorkspaceError
from engine.storage.atomic import atomic_write_bytes, swap_write_json

__all__ = [
    "WORKSPACE_DIRS",
    "AgentWorkspace",
    "DirWorkspace",
    "Entry",
    "as_workspace",
    "normalize",
    "workspace_name",
    "workspace_path",
]

#: The folders a fresh workspace has (AS2's layout).
WORKSPACE_DIRS = ("state", "memory", "custom/skills", ".runtime/logs")

EntryKind = Literal["file", "dir", "link", "other"]


@dataclass(frozen=True)
class Entry:
    """What a workspace path names."""

    kind: EntryKind
    size: int = 0  #: bytes, for files


def workspace_name(agent_id: int) -> str:
    """``agent_0007``: at least four digits, so names sort by id."""
    return f"agent_{agent_id:04d}"


def workspace_path(agents_root: Path, agent_id: int) -> Path:
    """``agents_root/agent_0007``."""
    return agents_root / workspace_name(agent_id)


def as_workspace(workspace: AgentWorkspace | Path) -> AgentWorkspace:
    """``workspace`` itself, or the folder on local disk a path names."""
    return workspace if isinstance(workspace, AgentWorkspace) else DirWorkspace(Path(workspace))


def normalize(path: str) -> str:
    """The canonical form of a workspace path (``a/b``; ``""`` for the root).

    Raises:
        WorkspaceError: an absolute path, a ``..`` part, a backslash or a NUL byte.
    """
    if "\x00" in path or "\\" in path:
        raise WorkspaceError(f"{path!r} is not a workspace path")
    # Plain string work, as PurePosixPath would fold it: called for every file operation of every agent.
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if path.startswith("/") or ".." in parts:
        raise WorkspaceError(f"{path!r} is not a path inside the workspace")
    return "/".join(parts)


class AgentWorkspace(ABC):
    """One agent's files. Subclasses implement the byte-level operations; the JSON helpers are shared.

    Args:
        name: the workspace's name (``agent_0007``): stable across backends, so ids derived from it
            (TODO items) are the same on every backend.
    """

    def __init__(self, name: str) -> None:
        self.name = name

    # ---- what a backend implements -----------------------------------------------------------
    @abstractmethod
    def stat(self, path: str) -> Entry | None:
        """What ``path`` is (None: nothing)."""

    @abstractmethod
    def read_bytes(self, path: str) -> bytes:
        """The content of file ``path``."""

    @abstractmethod
    def write_bytes(self, path: str, data: bytes) -> None:
        """Replace (or create) file ``path``; atomic against a crash."""

    @abstractmethod
    def append_bytes(self, path: str, data: bytes) -> None:
        """Add ``data`` at the end of file ``path`` (created if missing)."""

    @abstractmethod
    def delete(self, path: str) -> None:
        """Remove file ``path`` (nothing if it does not exist)."""

    @abstractmethod
    def listdir(self, path: str) -> list[tuple[str, Entry]]:
        """The entries of folder ``path`` by name, sorted (hidden names included)."""

    @abstractmethod
    def make_dir(self, path: str) -> None:
        """Make folder ``path`` (and its parents) if missing."""

    def resolve(self, path: str) -> str:
        """``path`` with any symbolic links followed, still relative to the workspace.

        Raises:
            WorkspaceError: it leads outside the workspace (or loops).
        """
        return normalize(path)

    def local_dir(self, path: str) -> Path | None:
        """Folder ``path`` on local disk, for code that must see real files (a skill's scripts); None: no such folder."""
        return None

    # ---- shared helpers ----------------------------------------------------------------------
    def exists(self, path: str) -> bool:
        return self.stat(path) is not None

    def is_file(self, path: str) -> bool:
        entry = self.stat(path)
        return entry is not None and entry.kind == "file"

    def is_dir(self, path: str) -> bool:
        entry = self.stat(path)
        return entry is not None and entry.kind == "dir"

    def size(self, path: str) -> int:
        """The size of file ``path`` (0 when missing)."""
        entry = self.stat(path)
        return entry.size if entry is not None and entry.kind == "file" else 0

    def read_text(self, path: str) -> str:
        return self.read_bytes(path).decode("utf-8")

    def write_text(self, path: str, text: str) -> None:
        self.write_bytes(path, text.encode("utf-8"))

    def read_json(self, path: str) -> Any:
        """Read a JSON file of the workspace.

        Raises:
            WorkspaceError: missing or corrupt.
        """
        try:
            return json.loads(self.read_bytes(path))
        except FileNotFoundError:
            raise WorkspaceError(f"{self.name}/{path} does not exist") from None
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise WorkspaceError(f"{self.name}/{path} is corrupt: {error}") from None

    def write_json(self, path: str, value: Any) -> None:
        self.write_bytes(path, json.dumps(value, default=str, ensure_ascii=False).encode("utf-8"))

    def swap_json(self, path: str, value: Any) -> None:
        """Rewrite a file that changes every step (``AGENT.json``); see :meth:`DirWorkspace.swap_json`."""
        self.write_json(path, value)

    def append_jsonl(self, path: str, records: list[dict[str, Any]]) -> None:
        """Append records to a log (one write, so a crash loses at most the tail line)."""
        if records:
            self.append_bytes(path, "".join(json.dumps(r, ensure_ascii=False, default=str) + "\n" for r in records).encode("utf-8"))

    def read_jsonl(self, path: str) -> list[dict[str, Any]]:
        """The records of a log (none when missing); a torn or unreadable line is skipped."""
        try:
            text = self.read_bytes(path).decode("utf-8", errors="replace")
        except FileNotFoundError:
            return []
        records = []
        for line in text.splitlines():
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError:
                    continue
        return records

    def make_dirs(self) -> None:
        """The folders of a fresh workspace."""
        for sub in WORKSPACE_DIRS:
            self.make_dir(sub)

    def files(self, path: str = "") -> Iterator[str]:
        """Every file under folder ``path``, sorted, as workspace paths (symbolic links are not followed)."""
        base = normalize(path)
        for name, entry in self.listdir(base):
            child = f"{base}/{name}" if base else name
            if entry.kind == "dir":
                yield from self.files(child)
            elif entry.kind == "file":
                yield child

    def dirs(self, path: str = "") -> Iterator[str]:
        """Every folder under folder ``path``, parents first."""
        base = normalize(path)
        for name, entry in self.listdir(base):
            if entry.kind == "dir":
                child = f"{base}/{name}" if base else name
                yield child
                yield from self.dirs(child)


# ---- on local disk ---------------------------------------------------------------------------

class DirWorkspace(AgentWorkspace):
    """A workspace that is a directory on local disk.

    Args:
        root: the workspace directory (its name is the workspace's name).
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        super().__init__(self.root.name)
        self._real = self.root.resolve()

    @property
    def logs(self) -> Path:
        return self.root / ".runtime" / "logs"

    def _path(self, path: str) -> Path:
        rel = normalize(path)
        return self.root / rel if rel else self.root

    def resolve(self, path: str) -> str:
        try:
            real = self._path(path).resolve(strict=False)
        except (OSError, RuntimeError):
            raise WorkspaceError(f"{path!r} cannot be resolved (symlink loop)") from None
        if not real.is_relative_to(self._real):
            raise WorkspaceError(f"{path!r} leads outside the workspace through a symlink")
        rel = real.relative_to(self._real).as_posix()
        return "" if rel == "." else rel

    def local_dir(self, path: str) -> Path | None:
        target = self._path(path)
        return target if target.is_dir() else None

    def stat(self, path: str) -> Entry | None:
        try:
            info = os.lstat(self._path(path))
        except FileNotFoundError:
            return None
        if stat_module.S_ISLNK(info.st_mode):
            # A symlink the runtime made (AGENT.json's swap) is followed; one out of the workspace is a link.
            try:
                if self.resolve(path):
                    info = os.stat(self._path(path))
                else:
                    return Entry("link")
            except (WorkspaceError, OSError):
                return Entry("link")
        if stat_module.S_ISDIR(info.st_mode):
            return Entry("dir")
        if stat_module.S_ISREG(info.st_mode):
            return Entry("file", info.st_size)
        return Entry("other")

    def read_bytes(self, path: str) -> bytes:
        return self._path(path).read_bytes()

    def write_bytes(self, path: str, data: bytes) -> None:
        target = self._path(path)
        parent = target.parent
        while parent != self.root and not parent.exists():
            parent = parent.parent
        if not parent.is_dir():
            raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), str(target))
        # Atomic against a process crash (rename); no fsync: one per agent per tick costs more than the rest of the step.
        atomic_write_bytes(target, data, durable=False)

    def swap_json(self, path: str, value: Any) -> None:
        """Rewrite by symlink swap (see :func:`~engine.storage.atomic.swap_write_json`): far cheaper than a rename on ext4."""
        swap_write_json(self._path(path), value)

    def append_bytes(self, path: str, data: bytes) -> None:
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "ab") as handle:
            handle.write(data)

    def delete(self, path: str) -> None:
        self._path(path).unlink(missing_ok=True)

    def make_dir(self, path: str) -> None:
        self._path(path).mkdir(parents=True, exist_ok=True)

    def listdir(self, path: str) -> list[tuple[str, Entry]]:
        base = normalize(path)
        rows = []
        with os.scandir(self._path(base)) as entries:
            for entry in entries:
                child = f"{base}/{entry.name}" if base else entry.name
                if entry.is_symlink():
                    rows.append((entry.name, self.stat(child) or Entry("link")))
                elif entry.is_dir(follow_symlinks=False):
                    rows.append((entry.name, Entry("dir")))
                elif entry.is_file(follow_symlinks=False):
                    rows.append((entry.name, Entry("file", entry.stat(follow_symlinks=False).st_size)))
                else:
                    rows.append((entry.name, Entry("other")))
        return sorted(rows)
