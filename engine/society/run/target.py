"""Run locations: where a new run may land (never onto a run or a sweep, unless asked to replace it), and whether
a location a reader names holds one.

A run started into a used folder would find the old run's files, so the engine refused it from inside the
driver, after the cluster had started, and recorded a failed run, while a caller reading the folder saw the old
run's ``completed`` as if it were the new one's. :func:`claim_run_target` is the check every front door (the
Python API, the CLI) makes first, before any cluster starts: it raises :class:`~engine.errors.RunExistsError`
naming how to read, continue or replace what is there; with ``overwrite=True`` it removes the old run first
(never a folder that holds no run, and never a run a live driver holds). :func:`require_run` is the readers'
check (``polis query``, ``polis.open_run``): a mistyped folder is an error that says what is there, never an
empty listing.
"""

from __future__ import annotations

from pathlib import Path

from engine.errors import NotARunError, RunExistsError, RunLockedError
from engine.society.lease import effective_status, lease_is_live, read_lease
from engine.society.status import read_society_step
from engine.storage.run_layout import SOCIETY_FILE, SOCIETY_STEP_FILE, RunLocation, as_location, run_store
from engine.storage.sweep_layout import SWEEP_FILE

__all__ = ["claim_run_target", "held_run", "require_run"]


def held_run(location: RunLocation) -> str | None:
    """What ``location`` holds, in words (``"a run (completed, 2 ticks)"``, ``"a sweep"``), or None: nothing of Polis."""
    where = as_location(location)
    if isinstance(where, Path) and (where / SWEEP_FILE).is_file():
        return "a sweep"
    store = run_store(where)
    step = read_society_step(store)
    if step is not None:
        return f"a run ({effective_status(where)}, {step.step_count} tick{'s' * (step.step_count != 1)} committed)"
    if store.exists(SOCIETY_FILE) or store.exists(SOCIETY_STEP_FILE):
        return "a run (started, no tick committed)"
    return None


def claim_run_target(location: RunLocation, *, overwrite: bool = False) -> None:
    """Make sure a new run may write into ``location``; with ``overwrite``, remove the run or sweep it holds.

    Raises:
        RunExistsError: ``location`` holds a run or a sweep and ``overwrite`` is False.
        RunLockedError: ``overwrite`` asked to remove a run that a live driver is running.
    """
    where = as_location(location)
    held = held_run(where)
    if held is None:
        return
    if not overwrite:
        shown = str(where)
        raise RunExistsError(
            f"{shown} already holds {held}: a new run never lands on an old one. Read it with "
            f"polis.open_run({shown!r}), continue it with polis.resume({shown!r}) (polis run --resume {shown}), "
            "or replace it with overwrite=True (polis run --overwrite); or choose another folder"
        )
    if lease_is_live(read_lease(where)):
        raise RunLockedError(f"{where} holds {held} that a live driver is running: it cannot be overwritten; cancel it first")
    run_store(where).delete_prefix("")  # a sweep root's cells too: every key under it, at any depth


def require_run(location: RunLocation) -> Path | str:
    """``location`` as a run location, if it holds a run (a committed tick) or a sweep.

    Raises:
        NotARunError: it holds neither; the message says what is there instead.
    """
    where = as_location(location)
    if isinstance(where, Path) and (where / SWEEP_FILE).is_file():
        return where
    if isinstance(where, Path) and not where.is_dir():
        raise NotARunError(f"{where} is not a run: {_what_is_there(where)}")
    if read_society_step(where) is None:
        raise NotARunError(f"{where} is not a run: {_what_is_there(where)}")
    return where


def _what_is_there(location: Path | str) -> str:
    if isinstance(location, str):
        return f"its store holds no {SOCIETY_STEP_FILE}"
    if not location.exists():
        return "it does not exist"
    if not location.is_dir():
        return "it is a file (give the run's directory)"
    files, folders = run_store(location).list_dir("")
    names = sorted([*files, *folders])[:8]
    return f"a directory without {SOCIETY_STEP_FILE} or {SWEEP_FILE} (it holds: {', '.join(names) or 'nothing'})"
