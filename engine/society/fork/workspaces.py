"""Agent workspaces as a committed tick left them, copied out of a run without changing it.

The state of tick ``K`` is the step journal of tick ``K + 1`` (:class:`~engine.agent.journal.StepJournal`
records every file before the agent steps), or the workspace itself when the agent has not begun a
later tick. A journal's hard links share their inodes with files the runtime later appended to, so a
file is copied up to the size the journal recorded, never linked: the copy may be appended to in turn.
Folders are taken from the workspace as it is now (the runtime never removes one).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from engine.agent.journal import StepJournal
from engine.errors import ForkError

__all__ = ["copy_workspace_as_of", "workspace_kept"]

_TXN = os.path.join(".runtime", "txn")
_CHUNK = 1 << 20


def workspace_kept(workspace: Path, step: int, ticks_done: int) -> bool:
    """Whether ``workspace`` can still be had as tick ``step`` left it (``ticks_done``: the run's committed ticks)."""
    return StepJournal(workspace).has(step + 1) or (step == ticks_done and workspace.is_dir())


def copy_workspace_as_of(workspace: Path, dest: Path, step: int, ticks_done: int) -> int:
    """Write ``workspace`` as tick ``step`` left it into ``dest`` (new); returns the bytes copied.

    Raises:
        ForkError: the run keeps no journal of that tick for this agent.
    """
    journal = StepJournal(workspace)
    if journal.has(step + 1):
        manifest = json.loads((journal.dir / f"step_{step + 1:06d}.json").read_text(encoding="utf-8"))
    elif step == ticks_done and workspace.is_dir():
        manifest = None
    else:
        raise ForkError(f"{workspace}: tick {step} is not kept (no journal of tick {step + 1}); raise snapshots.keep")
    _copy_folders(workspace, dest)
    if manifest is None:
        return _copy_current(workspace, dest)
    # Plain strings and one makedirs per folder: a 1,000-agent fork copies ~7,000 files, and pathlib
    # and repeated mkdir calls were most of its time.
    root, backups = str(dest), str(journal.dir)
    made = {root}
    copied = 0
    for relative, entry in manifest.items():
        target = os.path.join(root, relative)
        folder = os.path.dirname(target)
        if folder not in made:  # _copy_folders made every folder the workspace has now; the runtime removes none
            os.makedirs(folder, exist_ok=True)
            made.add(folder)
        if "link" in entry:
            os.symlink(entry["link"], target)
            continue
        copied += _copy_prefix(os.path.join(backups, entry["backup"]), target, entry["size"])
    return copied


def _copy_folders(workspace: Path, dest: Path) -> None:
    """Make ``dest`` and every folder of ``workspace`` in it (not the journals', not symlinked ones)."""
    os.makedirs(dest)
    skip = os.path.join(str(workspace), _TXN)
    pending = [(str(workspace), str(dest))]
    while pending:
        source, target = pending.pop()
        with os.scandir(source) as entries:
            for entry in entries:
                if entry.is_dir(follow_symlinks=False) and entry.path != skip:
                    folder = os.path.join(target, entry.name)
                    os.mkdir(folder)
                    pending.append((entry.path, folder))


def _copy_current(workspace: Path, dest: Path) -> int:
    copied = 0
    for directory, folders, files in os.walk(workspace):
        relative = os.path.relpath(directory, workspace)
        if relative == _TXN:
            folders.clear()
            continue
        for name in [*files, *(f for f in folders if os.path.islink(os.path.join(directory, f)))]:
            source = Path(directory, name)
            if source.is_symlink():
                os.symlink(os.readlink(source), dest / relative / name)
            else:
                shutil.copyfile(source, dest / relative / name)
                copied += source.stat().st_size
    return copied


def _copy_prefix(source: str, target: str, size: int) -> int:
    """Copy the first ``size`` bytes of ``source`` (what the file held when the journal linked it)."""
    left = size
    with open(source, "rb") as reader, open(target, "wb") as writer:
        while left > 0:
            chunk = reader.read(min(_CHUNK, left))
            if not chunk:
                raise ForkError(f"{source}: holds fewer bytes than the {size} its journal recorded")
            writer.write(chunk)
            left -= len(chunk)
    return size
