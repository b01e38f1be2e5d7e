"""StepJournal: an undo journal that makes one agent-step a transaction over its workspace.

Before an agent steps tick ``k`` the journal records every file of the workspace (size, inode,
symlink target) and hard-links each regular file into ``.runtime/txn/``. That costs no data
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
import functools
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

from engine.errors import WorkspaceError

__all__ = ["StepJournal"]

_TXN_DIR = os.path.join(".runtime", "txn")


class StepJournal:
    """The undo journals of one agent workspace.

    A journal for step ``k`` is ``.runtime/txn/step_<k>.json`` (the manifest, written last, by rename,
    so its presence means the journal is complete) plus hard links ``step_<k>.f<i>``. One flat
    directory and no per-step subdirectory: creating and removing a directory per agent-step cost
    more than everything else the journal does.

    Args:
        root: the workspace directory.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._root = str(root)
        self._dir = os.path.join(self._root, _TXN_DIR)
        self.dir = Path(self._dir)

    def _prefix(self, step: int) -> str:
        return os.path.join(self._dir, f"step_{step:06d}")

    def _entries(self) -> list[str]:
        try:
            return os.listdir(self._dir)
        except FileNotFoundError:
            return []

    def steps(self) -> list[int]:
        """Steps with a complete journal, oldest first."""
        found = set()
        for name in self._entries():
            if name.startswith("step_") and name.endswith(".json") and name[5:-5].isdigit():
                found.add(int(name[5:-5]))
        return sorted(found)

    def has(self, step: int) -> bool:
        return os.path.exists(self._prefix(step) + ".json")

    def _files(self) -> dict[str, os.stat_result]:
        """Every file and symlink of the workspace (outside the journals) by relative path."""
        found: dict[str, os.stat_result] = {}
        pending = [("", self._root)]
        while pending:
            relative, directory = pending.pop()
            with os.scandir(directory) as entries:
                for entry in entries:
                    rel = f"{relative}{entry.name}"
                    if entry.is_dir(follow_symlinks=False):
                        if entry.path != self._dir:
                            pending.append((rel + os.sep, entry.path))
                    else:
                        found[rel] = entry.stat(follow_symlinks=False)
        return found

    def begin(self, step: int) -> None:
        """Record the workspace as it is before ``step`` (a no-op when that journal exists).

        Raises:
            WorkspaceError: the journal could not be written.
        """
        prefix = self._prefix(step)
        if os.path.exists(prefix + ".json"):
            return
        try:
            os.makedirs(self._dir, exist_ok=True)
            entries: dict[str, dict[str, object]] = {}
            for index, (relative, info) in enumerate(sorted(self._files().items())):
                path = os.path.join(self._root, relative)
                if stat.S_ISLNK(info.st_mode):
                    entries[relative] = {"link": os.readlink(path)}
                    continue
                backup = f"{prefix}.f{index}"
                try:
                    os.link(path, backup)
                except FileExistsError:  # left by a begin that crashed before its manifest
                    os.unlink(backup)
                    os.link(path, backup)
                entries[relative] = {"size": info.st_size, "ino": info.st_ino, "backup": os.path.basename(backup)}
            temp = prefix + ".json.tmp"
            with open(temp, "w", encoding="utf-8") as handle:
                handle.write(json.dumps(entries))
            os.replace(temp, prefix + ".json")
        except OSError as error:
            raise WorkspaceError(f"{self.root}: cannot journal step {step}: {error}") from error

    def rollback(self, step: int) -> None:
        """Put the workspace back as it was when :meth:`begin` ran for ``step``; the journal stays.

        Raises:
            WorkspaceError: no journal for ``step``, or the file system refused.
        """
        try:
            with open(self._prefix(step) + ".json", encoding="utf-8") as handle:
                entries = json.loads(handle.read())
        except (OSError, ValueError) as error:
            raise WorkspaceError(f"{self.root}: no usable journal for step {step}: {error}") from error
        try:
            for relative in self._files():
                if relative not in entries:
                    os.unlink(os.path.join(self._root, relative))
            for relative, entry in entries.items():
                path = Path(self._root, relative)
                if "link" in entry:
                    if not (os.path.islink(path) and os.readlink(path) == entry["link"]):
                        _swap_in(path, functools.partial(os.symlink, entry["link"]))  # symlink(target, temp)
                    continue
                current = os.lstat(path) if os.path.lexists(path) else None
                if current is None or current.st_ino != entry["ino"]:
                    path.parent.mkdir(parents=True, exist_ok=True)
                    _swap_in(path, functools.partial(os.link, os.path.join(self._dir, entry["backup"])))  # link(backup, temp)
                if os.path.getsize(path) != entry["size"]:
                    os.truncate(path, entry["size"])
        except OSError as error:
            raise WorkspaceError(f"{self.root}: rolling back step {step} failed: {error}") from error

    def discard(self, step: int) -> None:
        """Forget the journal of a committed step (manifest first, so a half-discarded journal is no journal)."""
        name = os.path.basename(self._prefix(step))
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._prefix(step) + ".json")
        for entry in self._entries():
            if entry.startswith(name + "."):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self._dir, entry))

    def discard_through(self, step: int) -> None:
        """Forget the journals of every step ``<= step`` (all committed), including half-written ones."""
        for entry in self._entries():
            number = entry[5:11]
            if entry.startswith("step_") and number.isdigit() and int(number) <= step:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(self._dir, entry))


def _swap_in(path: Path, make: Callable[[str], None]) -> None:
    """Create the replacement beside ``path`` with ``make(temp)`` and rename it over ``path``."""
    temp = os.path.join(path.parent, f".{path.name}.undo")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp)
    make(temp)
    os.replace(temp, path)
