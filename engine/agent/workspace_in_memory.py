"""A workspace held in memory: how a batch steps agents whose state lives in packs (:mod:`engine.agent.packed`).

Committed files are fetched on first read; appends are kept apart from the committed bytes, so a log
is never read just to be appended to; :meth:`MemoryWorkspace.changes` tells what a step did.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from engine.agent.workspace import AgentWorkspace, Entry, normalize
from engine.errors import WorkspaceError
from engine.storage.atomic import atomic_write_bytes

__all__ = ["Loader", "MemoryWorkspace", "WorkspaceChanges"]

#: A file's committed content, fetched when first needed: the packed store's lazy reader.
Loader = Callable[[], bytes]


@dataclass
class _File:
    base: Loader | bytes | None  #: the committed content (None: the file is new)
    base_size: int
    appended: bytearray  #: bytes added since the commit (kept apart, so a log is never read to be appended to)
    replaced: bytes | None = None  #: the whole new content, when the file was rewritten

    def content(self) -> bytes:
        if self.replaced is not None:
            return self.replaced + bytes(self.appended)
        if self.base is None:
            return bytes(self.appended)
        if not isinstance(self.base, bytes):
            self.base = self.base()
        if len(self.base) != self.base_size:
            raise WorkspaceError(f"a committed file holds {len(self.base)} bytes, not the {self.base_size} its tree says")
        return self.base + bytes(self.appended)

    @property
    def size(self) -> int:
        head = len(self.replaced) if self.replaced is not None else self.base_size
        return head + len(self.appended)


@dataclass(frozen=True)
class WorkspaceChanges:
    """What a step did to a :class:`MemoryWorkspace`, relative to what it was loaded with."""

    replaced: dict[str, bytes]  #: files written whole (new, or rewritten)
    appended: dict[str, bytes]  #: files that kept their committed content and grew by these bytes
    deleted: tuple[str, ...]  #: committed files that are gone
    new_dirs: tuple[str, ...]  #: folders made (empty ones matter: a fresh workspace has some)

    def __bool__(self) -> bool:
        return bool(self.replaced or self.appended or self.deleted or self.new_dirs)


class MemoryWorkspace(AgentWorkspace):
    """A workspace held in memory.

    Args:
        name: the workspace's name (``agent_0007``).
        files: the committed files: content, or ``(size, loader)`` to fetch the content on first read.
        dirs: the committed folders (parents of files are implied).
    """

    def __init__(self, name: str, files: Mapping[str, bytes | tuple[int, Loader]] | None = None,
                 dirs: tuple[str, ...] | list[str] = ()) -> None:
        super().__init__(name)
        self._files: dict[str, _File] = {}
        for path, value in (files or {}).items():
            if isinstance(value, bytes):
                self._files[path] = _File(value, len(value), bytearray())
            else:
                size, loader = value
                self._files[path] = _File(loader, size, bytearray())
        self._base_files = frozenset(self._files)
        self._deleted: set[str] = set()
        self._dirs: set[str] = set()
        for folder in dirs:
            self._add_dir(folder)
        for path in self._files:
            self._add_dir(_parent(path))
        self._base_dirs = frozenset(self._dirs)

    def _add_dir(self, folder: str) -> None:
        while folder not in ("", "."):
            self._dirs.add(folder)
            folder = _parent(folder)

    def _oserror(self, kind: type[OSError], code: int, rel: str) -> OSError:
        return kind(code, os.strerror(code), f"{self.name}/{rel}")

    def _check_parents(self, rel: str) -> None:
        parent = _parent(rel)
        while parent:
            if parent in self._files:
                raise self._oserror(NotADirectoryError, errno.ENOTDIR, rel)
            parent = _parent(parent)

    def stat(self, path: str) -> Entry | None:
        rel = normalize(path)
        if rel == "" or rel in self._dirs:
            return Entry("dir")
        found = self._files.get(rel)
        if found is None:
            self._check_parents(rel)
            return None
        return Entry("file", found.size)

    def _file(self, path: str) -> _File:
        rel = normalize(path)
        found = self._files.get(rel)
        if found is None:
            if rel == "" or rel in self._dirs:
                raise self._oserror(IsADirectoryError, errno.EISDIR, rel)
            self._check_parents(rel)
            raise self._oserror(FileNotFoundError, errno.ENOENT, rel)
        return found

    def read_bytes(self, path: str) -> bytes:
        return self._file(path).content()

    def _writable(self, path: str) -> str:
        rel = normalize(path)
        if rel == "" or rel in self._dirs:
            raise self._oserror(IsADirectoryError, errno.EISDIR, rel)
        self._check_parents(rel)
        self._add_dir(_parent(rel))
        return rel

    def write_bytes(self, path: str, data: bytes) -> None:
        rel = self._writable(path)
        self._files[rel] = _File(None, 0, bytearray(), replaced=bytes(data))
        self._deleted.discard(rel)

    def append_bytes(self, path: str, data: bytes) -> None:
        rel = self._writable(path)
        found = self._files.get(rel)
        if found is None:
            found = self._files[rel] = _File(None, 0, bytearray(), replaced=b"")
            self._deleted.discard(rel)
        found.appended += data

    def delete(self, path: str) -> None:
        rel = normalize(path)
        if self._files.pop(rel, None) is not None and rel in self._base_files:
            self._deleted.add(rel)

    def make_dir(self, path: str) -> None:
        rel = normalize(path)
        if rel in self._files:
            raise self._oserror(FileExistsError, errno.EEXIST, rel)
        self._check_parents(rel)
        self._add_dir(rel)

    def listdir(self, path: str) -> list[tuple[str, Entry]]:
        rel = normalize(path)
        if rel in self._files:
            raise self._oserror(NotADirectoryError, errno.ENOTDIR, rel)
        if rel != "" and rel not in self._dirs:
            raise self._oserror(FileNotFoundError, errno.ENOENT, rel)
        prefix = f"{rel}/" if rel else ""
        found: dict[str, Entry] = {}
        for folder in self._dirs:
            if folder.startswith(prefix) and "/" not in folder[len(prefix):]:
                found[folder[len(prefix):]] = Entry("dir")
        for file, state in self._files.items():
            if file.startswith(prefix) and "/" not in file[len(prefix):]:
                found[file[len(prefix):]] = Entry("file", state.size)
        return sorted(found.items())

    def files(self, path: str = "") -> Iterator[str]:
        prefix = f"{normalize(path)}/" if normalize(path) else ""
        yield from sorted((p for p in self._files if p.startswith(prefix)), key=_depth_first)

    def dirs(self, path: str = "") -> Iterator[str]:
        prefix = f"{normalize(path)}/" if normalize(path) else ""
        yield from sorted((d for d in self._dirs if d.startswith(prefix)), key=_depth_first)

    def local_dir(self, path: str) -> Path | None:
        """A copy of folder ``path`` on local disk, named by its content (made once per content and process's temp dir).

        For the few readers that need real files: a researcher's custom skills, whose scripts are imported."""
        rel = normalize(path)
        prefix = f"{rel}/" if rel else ""
        inside = sorted(p for p in self._files if p.startswith(prefix))
        if not inside:
            return None
        digest = hashlib.sha256()
        for file in inside:
            data = self.read_bytes(file)
            digest.update(f"{file[len(prefix):]}\0{len(data)}\0".encode())
            digest.update(data)
        target = Path(tempfile.gettempdir()) / "polis-workspace-files" / digest.hexdigest()[:32]
        if not target.is_dir():
            staging = target.with_name(f".{target.name}.tmp-{uuid.uuid4().hex}")
            for file in inside:
                atomic_write_bytes(staging / file[len(prefix):], self.read_bytes(file), durable=False)
            try:
                staging.rename(target)
            except OSError:  # another task made it first: the content is the same
                shutil.rmtree(staging, ignore_errors=True)
        return target

    def changes(self) -> WorkspaceChanges:
        """What changed since the workspace was loaded."""
        replaced: dict[str, bytes] = {}
        appended: dict[str, bytes] = {}
        for path, state in self._files.items():
            if state.replaced is not None:
                replaced[path] = state.replaced + bytes(state.appended)
            elif state.appended:
                appended[path] = bytes(state.appended)
        return WorkspaceChanges(replaced, appended, tuple(sorted(self._deleted)), tuple(sorted(self._dirs - self._base_dirs)))


def _parent(path: str) -> str:
    """``a/b`` for ``a/b/c``; ``""`` at the top."""
    return path.rpartition("/")[0]


def _depth_first(path: str) -> list[str]:
    """Sort key: the order :meth:`AgentWorkspace.files` walks a folder tree in (names sorted within each folder)."""
    return path.split("/")
