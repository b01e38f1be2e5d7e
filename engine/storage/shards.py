"""Shard names: one file per (dataset, step, batch), named so that shards sort by step.

A shard name is the whole identity of a write. Writing the same name again replaces the file, which
is what makes a retried Dask batch task idempotent.
"""

from __future__ import annotations

import re

from engine.errors import StorageError

__all__ = ["SHARD_PATTERN", "check_shard", "shard_name"]

#: What a shard name may contain: no slashes, so a shard can never leave its dataset directory.
SHARD_PATTERN = re.compile(r"^[A-Za-z0-9_.-]+$")


def check_shard(shard: str) -> str:
    """Validate a shard name.

    Args:
        shard: the name to check.

    Returns:
        ``shard`` unchanged.

    Raises:
        StorageError: the name is empty, contains characters outside ``[A-Za-z0-9_.-]``, starts
            with ``.`` (reserved for temp files), or is ``..``.
    """
    if not isinstance(shard, str) or not SHARD_PATTERN.match(shard) or shard.startswith("."):
        raise StorageError(f"invalid shard name {shard!r}: use [A-Za-z0-9_.-], not starting with '.'")
    return shard


def shard_name(step: int, part: str | int) -> str:
    """Name the shard written for one step by one part (a batch number, or e.g. ``"env"``).

    Args:
        step: the simulation step (tick), ``>= 0``; zero-padded to 6 digits.
        part: a batch index (zero-padded to 4 digits) or a short name.

    Returns:
        e.g. ``step_000003-part_0002`` or ``step_000003-part_env``.

    Raises:
        StorageError: ``step`` or ``part`` is negative, or ``part`` is not a valid name.
    """
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise StorageError(f"step must be a non-negative int, got {step!r}")
    if isinstance(part, bool) or not isinstance(part, int | str):
        raise StorageError(f"part must be an int or a name, got {part!r}")
    if isinstance(part, int):
        if part < 0:
            raise StorageError(f"part must be non-negative, got {part}")
        return f"step_{step:06d}-part_{part:04d}"
    return check_shard(f"step_{step:06d}-part_{check_shard(part)}")
