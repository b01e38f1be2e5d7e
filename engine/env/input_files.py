"""Files a spec names (``MobilitySpace(city_file=...)``): read only from allowed roots.

A spec is user input, and the service runs it on servers it does not own, so a module must never
open whatever path a spec names. A named file resolves only under:

- the run's inputs directory, ``<run_dir>/inputs/``;
- the directories of the ``POLIS_INPUT_DIRS`` allow-list (``EngineSettings.input_dirs``, passed to
  the env actor in ``EnvRouterConfig.input_dirs``);
- the module's bundled data (``engine/env/modules/data``), by bare file name.

Anything else (an absolute path elsewhere, a ``..`` or symlink walk out of a root, a directory, a
device, a file that does not exist) is refused with one message, ``"<kwarg> must be a file under
<the roots>"``, which says nothing about whether the path exists or what it holds.

Which roots apply is set around module construction with :func:`input_roots` (``build_router``
does it for every run); outside it only bundled data can be named.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from engine.errors import SpecError
from engine.storage.run_layout import RunLayout, RunLocation, is_url

__all__ = ["MAX_INPUT_BYTES", "InputRoots", "current_input_roots", "input_roots", "resolve_input_file"]

#: The largest input file a module reads.
MAX_INPUT_BYTES = 16_000_000


@dataclass(frozen=True)
class InputRoots:
    """The directories whose files a spec may name (besides a module's bundled data)."""

    dirs: tuple[Path, ...] = ()  #: in lookup order: the run's inputs first, then the allow-list
    #: how a refusal names these directories, for whoever may not see the server's paths (the service's callers);
    #: None: they are listed (the CLI's user owns the machine)
    named: str | None = None

    @classmethod
    def for_run(cls, run_dir: RunLocation | None, allowed: tuple[Path, ...] = ()) -> InputRoots:
        """``<run_dir>/inputs`` (when there is a run directory on local disk) followed by ``allowed``, named in
        refusals by what they are, never by their paths: a run's error reaches the service's callers."""
        own = (RunLayout(Path(run_dir)).inputs,) if run_dir is not None and not is_url(run_dir) else ()
        places = [*(["the run's inputs/ folder"] if own else []), *(["the input folders (POLIS_INPUT_DIRS)"] if allowed else [])]
        named = f"{' or '.join(places)}, named relative to one of them" if places else None
        return cls((*own, *(Path(d) for d in allowed)), named=named)


_CURRENT: ContextVar[InputRoots | None] = ContextVar("polis_input_roots", default=None)


def current_input_roots() -> InputRoots:
    """The roots in force (an empty set outside :func:`input_roots`: bundled data only)."""
    return _CURRENT.get() or InputRoots()


@contextlib.contextmanager
def input_roots(roots: InputRoots) -> Iterator[InputRoots]:
    """Let modules constructed inside the ``with`` read files under ``roots``."""
    token = _CURRENT.set(roots)
    try:
        yield roots
    finally:
        _CURRENT.reset(token)


def _real(path: Path) -> Path | None:
    try:
        return path.resolve(strict=False)
    except (OSError, RuntimeError):  # a symlink loop
        return None


def _describe(roots: InputRoots, bundled: Path | None) -> str:
    if roots.named is not None and not roots.dirs and bundled is None:
        return f"{roots.named}, and there are none: the service reads no file until POLIS_INPUT_DIRS names a folder"
    places = [f"{d}/" for d in roots.dirs] if roots.named is None or not roots.dirs else [roots.named]
    if bundled is not None:
        names = sorted(p.name for p in bundled.iterdir() if p.is_file() and not p.name.startswith(("_", ".")))
        places.append(f"the bundled data ({', '.join(names) or 'none'})")
    return ", ".join(places) if places else "no allowed directory"


def resolve_input_file(kwarg: str, name: str, *, bundled: Path | None = None, roots: InputRoots | None = None) -> Path:
    """The real path of the input file ``name`` if it lies under an allowed root.

    Args:
        kwarg: the spec field naming the file (for the message), e.g. ``city_file``.
        name: a path relative to a root (tried in order), an absolute path under a root, or a
            bare file name in ``bundled``.
        bundled: the module's bundled data directory.
        roots: the allowed directories; default :func:`current_input_roots`.

    Returns:
        The resolved path of a regular file of at most :data:`MAX_INPUT_BYTES`.

    Raises:
        SpecError: ``name`` is not a regular file under an allowed root (one message for every
            reason, so that it reveals nothing about the server's files), or it is too large.
    """
    roots = current_input_roots() if roots is None else roots
    refusal = SpecError(f"{kwarg} must be a file under {_describe(roots, bundled)}")
    if not isinstance(name, str) or not name or "\x00" in name:
        raise refusal
    # Missing: under every allowed root the path stays inside it and nothing is there. Saying so tells nothing about
    # what lies outside them; any other reason (a walk out, a link out, a folder, a pipe) gets the one refusal.
    missing = True
    path = Path(name)
    bases = [*roots.dirs, *([bundled] if bundled is not None else [])]
    for base in bases:
        real_base = _real(base)
        if real_base is None:
            continue
        if base is bundled and (path.is_absolute() or len(path.parts) != 1):
            missing = False
            continue  # bundled data is named by bare file name only
        candidate = _real(path if path.is_absolute() else base / path)
        if candidate is None or not candidate.is_relative_to(real_base):
            missing = False
            continue
        try:
            info = os.stat(candidate)
        except FileNotFoundError:
            continue
        except OSError:
            missing = False
            continue
        if not stat.S_ISREG(info.st_mode):
            missing = False
            continue
        if info.st_size > MAX_INPUT_BYTES:
            raise SpecError(f"{kwarg} {name!r} is over the {MAX_INPUT_BYTES} byte limit for input files")
        return candidate
    if missing and bases:
        raise SpecError(f"{kwarg}: there is no file {name!r} under {_describe(roots, bundled)}")
    raise refusal
