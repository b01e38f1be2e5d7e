"""StepJournal: an undo journal that makes one agent-step a transaction over its workspace.

Before an agent steps tick ``k`` the journal records every file of the workspace (size, inode,
symlink target) and hard-links each regular file into ``.runtime/txn/step_<k>/``. That costs no data
copy and is enough to undo anything the runtime does to a workspace, because the runtime only ever
(a) replaces whole files by rename or symlink swap, which leaves the old inode (our hard link)
untouched, and (b) appends to files in place, which truncating to the recorded size undoes.

:meth:`rollback` puts every recorded file back (re-linking replaced ones, truncating appended ones,
restoring symlinks) and deletes files the step created. It is idempotent, so a crash during a
rollback is repaired by rolling back again. Once the society commits tick ``k`` the journal is
discarded (lazily, when the agent next steps).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from pathlib import Path

from engine.errors import WorkspaceError

__all__ = ["StepJournal"]

_TXN_DIR = Path(".runtime") / "txn"
_MANIFEST = "manifest.json"


class StepJournal:
    """The undo journals of one agent workspace.

    Args:
        root: the workspace directory.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self.dir = self.root / _TXN_DIR

    def _step_dir(self, step: int) -> Path:
        return self.dir / f"step_{step:06d}"

    def steps(self) -> list[int]:
        """Steps with a complete journal, oldest first (half-written ones are removed)."""
        if not self.dir.is_dir():
            return []
        found = []
        for entry in os.scandir(self.dir):
            if entry.name.startswith("step_") and entry.name[5:].isdigit():
                found.append(int(entry.name[5:]))
            else:  # a begin() that crashed before its final rename
                shutil.rmtree(entry.path, ignore_errors=True)
        return sorted(found)

    def has(self, step: int) -> bool:
        return self._step_dir(step).is_dir()

    def _files(self) -> dict[str, os.stat_result]:
        """Every file and symlink of the workspace (outside the journals) by relative path."""
        found: dict[str, os.stat_result] = {}
        skip = str(self.dir)
        for directory, dirs, names in os.walk(self.root):
            if directory == skip or directory.startswith(skip + os.sep):
                dirs[:] = []
                continue
            for name in names + [d for d in dirs if os.path.islink(os.path.join(directory, d))]:
                path = os.path.join(directory, name)
                found[os.path.relpath(path, self.root)] = os.lstat(path)
        return found

    def begin(self, step: int) -> None:
        """Record the workspace as it is before ``step`` (a no-op when that journal exists).

        Raises:
            WorkspaceError: the journal could not be written.
        """
        final = self._step_dir(step)
        if final.is_dir():
            return
        staging = self.dir / f".begin-{step:06d}-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        try:
            staging.mkdir(parents=True)
            entries: dict[str, dict[str, object]] = {}
            for index, (relative, info) in enumerate(sorted(self._files().items())):
                path = self.root / relative
                if os.path.islink(path):
                    entries[relative] = {"link": os.readlink(path)}
                else:
                    backup = f"f{index}"
                    os.link(path, staging / backup)
                    entries[relative] = {"size": info.st_size, "ino": info.st_ino, "backup": backup}
            (staging / _MANIFEST).write_text(json.dumps(entries), encoding="utf-8")
            os.replace(staging, final)
        except OSError as error:
            shutil.rmtree(staging, ignore_errors=True)
            raise WorkspaceError(f"{self.root}: cannot journal step {step}: {error}") from error

    def rollback(self, step: int) -> None:
        """Put the workspace back as it was when :meth:`begin` ran for ``step``; the journal stays.

        Raises:
            WorkspaceError: no journal for ``step``, or the file system refused.
        """
        journal = self._step_dir(step)
        try:
            entries = json.loads((journal / _MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError) as error:
            raise WorkspaceError(f"{self.root}: no usable journal for step {step}: {error}") from error
        try:
            for relative in self._files():
                if relative not in entries:
                    os.unlink(self.root / relative)
            for relative, entry in entries.items():
                path = self.root / relative
                if "link" in entry:
                    if not (os.path.islink(path) and os.readlink(path) == entry["link"]):
                        temp = path.with_name(f".{path.name}.undo")
                        with contextlib.suppress(FileNotFoundError):
                            os.unlink(temp)
                        os.symlink(entry["link"], temp)
                        os.replace(temp, path)
                    continue
                current = os.lstat(path) if os.path.lexists(path) else None
                if current is None or current.st_ino != entry["ino"]:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    temp = path.with_name(f".{path.name}.undo")
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(temp)
                    os.link(journal / entry["backup"], temp)
                    os.replace(temp, path)
                if os.path.getsize(path) != entry["size"]:
                    os.truncate(path, entry["size"])
        except OSError as error:
            raise WorkspaceError(f"{self.root}: rolling back step {step} failed: {error}") from error

    def discard(self, step: int) -> None:
        """Forget the journal of a committed step."""
        shutil.rmtree(self._step_dir(step), ignore_errors=True)

    def discard_through(self, step: int) -> None:
        """Forget the journals of every step ``<= step`` (all committed)."""
        for old in self.steps():
            if old <= step:
                self.discard(old)
