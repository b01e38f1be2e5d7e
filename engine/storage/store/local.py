"""A store of files under a local directory."""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path

from engine.errors import StorageError, StoreKeyNotFoundError
from engine.storage.atomic import temp_path_for
from engine.storage.store.base import Store, check_key, check_prefix, check_range, dir_prefix, is_temp_name

__all__ = ["LocalStore"]

# How often a write makes its directory again when a concurrent delete pruned it before the temp file was opened.
_MKDIR_TRIES = 3


class LocalStore(Store):
    """Files under a local directory; a key is a file's path below it.

    ``set`` writes a temp file beside the target (``.<name>.tmp-<hex>``) and renames it over the target; listings
    skip such temp files, and deletes remove the directories they leave empty. OSErrors become
    :class:`~engine.errors.StorageError` naming the path.

    Args:
        root: the directory; it and its missing parents are made by the first write.
        durable: fsync each value before its rename, so that it survives a machine crash, not only a process crash.
    """

    def __init__(self, root: str | os.PathLike[str], *, durable: bool = False) -> None:
        self._root = Path(root).expanduser().absolute()
        self._durable = durable

    @property
    def url(self) -> str:
        return str(self._root)

    @property
    def local_root(self) -> Path:
        return self._root

    def _path(self, key: str) -> Path:
        return self._root / check_key(key)

    @contextlib.contextmanager
    def _os_errors(self, verb: str, path: Path, key: str | None = None) -> Iterator[None]:
        """Turn an OSError into a StorageError naming ``path``; a missing ``key`` into StoreKeyNotFoundError."""
        try:
            yield
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError) as exc:
            if key is None:
                raise StorageError(f"cannot {verb} {path}: {exc}") from exc
            raise StoreKeyNotFoundError(key, self.url) from exc
        except OSError as exc:
            raise StorageError(f"cannot {verb} {path}: {exc}") from exc

    def get(self, key: str) -> bytes:
        path = self._path(key)
        with self._os_errors("read", path, key):
            return path.read_bytes()

    def get_range(self, key: str, start: int, length: int) -> bytes:
        check_range(start, length)
        path = self._path(key)
        with self._os_errors("read", path, key), open(path, "rb") as fh:
            fh.seek(start)
            return fh.read(length)

    def _write_temp(self, path: Path, value: bytes) -> Path:
        """Write ``value`` to a new temp file beside ``path`` (parents made) and return the temp file's path."""
        tmp = temp_path_for(path)
        for attempt in range(1, _MKDIR_TRIES + 1):
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                break
            except FileNotFoundError:
                if attempt == _MKDIR_TRIES:
                    raise
        with open(fd, "wb") as fh:
            try:
                fh.write(value)
                if self._durable:
                    fh.flush()
                    os.fsync(fh.fileno())
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        return tmp

    def set(self, key: str, value: bytes) -> None:
        path = self._path(key)
        with self._os_errors("write", path):
            tmp = self._write_temp(path, value)
            try:
                os.replace(tmp, path)
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise

    def set_if_absent(self, key: str, value: bytes) -> bool:
        path = self._path(key)
        with self._os_errors("write", path):
            tmp = self._write_temp(path, value)
            try:
                # A hard link never replaces an existing name: of racing writers exactly one makes it, and
                # readers see the whole value from the start.
                os.link(tmp, path)
            except FileExistsError:
                return False
            finally:
                tmp.unlink(missing_ok=True)
        return True

    def move(self, source: str, target: str) -> bool:
        path, destination = self._path(source), self._path(target)
        with self._os_errors("move", path):
            destination.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.replace(path, destination)
            except FileNotFoundError:
                return False
        return True

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def size(self, key: str) -> int:
        path = self._path(key)
        with self._os_errors("read", path, key):
            info = path.stat()
        if not stat.S_ISREG(info.st_mode):
            raise StoreKeyNotFoundError(key, self.url)
        return info.st_size

    def _scan(self, directory: Path) -> tuple[list[str], list[str]]:
        """Return the names of the files and of the sub-directories of ``directory``, temp files left out."""
        files: list[str] = []
        dirs: list[str] = []
        with self._os_errors("list", directory):
            try:
                entries = list(os.scandir(directory))
            except (FileNotFoundError, NotADirectoryError):
                return files, dirs
            for entry in entries:
                if is_temp_name(entry.name):
                    continue
                if entry.is_dir(follow_symlinks=False):
                    dirs.append(entry.name)
                elif entry.is_file():
                    files.append(entry.name)
        return files, dirs

    def list_prefix(self, prefix: str) -> list[str]:
        check_prefix(prefix)
        keys: list[str] = []
        # Start in the deepest directory that holds every match, and descend only where matches can be.
        pending = [prefix.rpartition("/")[0]]
        while pending:
            base = pending.pop()
            files, dirs = self._scan(self._root / base)
            rel = f"{base}/" if base else ""
            keys.extend(key for name in files if (key := rel + name).startswith(prefix))
            pending.extend(key for name in dirs if (key := rel + name).startswith(prefix))
        return sorted(keys)

    def usage(self, prefix: str = "") -> int:
        """The bytes under ``prefix``, a file hard-linked under several keys counted once."""
        seen: set[tuple[int, int]] = set()
        total = 0
        for key in self.list_prefix(prefix):
            try:
                stat = self._path(key).stat(follow_symlinks=False)
            except FileNotFoundError:  # deleted meanwhile
                continue
            if (stat.st_dev, stat.st_ino) not in seen:
                seen.add((stat.st_dev, stat.st_ino))
                total += stat.st_size
        return total

    def list_dir(self, prefix: str) -> tuple[list[str], list[str]]:
        files, dirs = self._scan(self._root / dir_prefix(prefix))
        return sorted(files), sorted(dirs)

    def _prune(self, directory: Path) -> None:
        """Remove ``directory`` and its parents below the root while they are empty."""
        while directory != self._root and self._root in directory.parents:
            try:
                directory.rmdir()
            except OSError:  # not empty, or gone already (then whoever removed it prunes its parents)
                return
            directory = directory.parent

    def delete(self, key: str) -> None:
        path = self._path(key)
        with self._os_errors("delete", path):
            path.unlink(missing_ok=True)
        self._prune(path.parent)

    def delete_prefix(self, prefix: str) -> int:
        keys = self.list_prefix(prefix)
        for key in keys:
            path = self._path(key)
            with self._os_errors("delete", path):
                path.unlink(missing_ok=True)
        for directory in sorted({self._path(key).parent for key in keys}, key=lambda p: len(p.parts), reverse=True):
            self._prune(directory)
        return len(keys)

    def child(self, prefix: str) -> LocalStore:
        return LocalStore(self._root / check_key(prefix.removesuffix("/")), durable=self._durable)
