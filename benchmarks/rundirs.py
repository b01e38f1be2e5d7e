"""Run directories for benchmarks that run specs side by side: one temporary root, removed after every run.

Removing a run's directory as soon as it ends charges that deletion to the run measured next
where creating files soon after mass deletions is slow. On the ext4 disks of this workplace's VMs
(mounted without a journal) each new inode skips those freed in the last half-minute or so, so a
1,000-agent run started right after another run's directory (about 30,000 files) was removed
spent most of its ticks in the kernel (``perf``: ``recently_deleted`` under ``ext4_create`` and
``ext4_mkdir``). The root's filesystem is printed, since it can weigh more than the code:
``TMPDIR=/dev/shm`` measures Polis rather than the disk.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

__all__ = ["disk_usage", "filesystem", "largest_parts", "positive", "run_root"]


def positive(text: str) -> int:
    """An argparse type: an integer of at least 1 (``--repeat 0`` would measure nothing)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def disk_usage(root: Path) -> tuple[int, int]:
    """Files and allocated bytes (blocks, as ``du`` counts them) under ``root``."""
    files = size = 0
    for directory, _, names in os.walk(root):
        for name in names:
            files += 1
            size += os.lstat(os.path.join(directory, name)).st_blocks * 512
    return files, size


def largest_parts(run_dir: Path, count: int = 6) -> list[tuple[str, int]]:
    """The ``count`` largest parts of a run directory by allocated bytes: each replay dataset, and every other top folder."""
    parts = [p for p in run_dir.iterdir() if p.name != "replay"] + [p for p in (run_dir / "replay").iterdir()]
    sized = [(str(p.relative_to(run_dir)), disk_usage(p)[1] if p.is_dir() else p.lstat().st_blocks * 512) for p in parts]
    return sorted(sized, key=lambda item: -item[1])[:count]


def filesystem(path: Path) -> str:
    """The type of the filesystem ``path`` is on (``?`` where ``/proc/mounts`` does not tell)."""
    target = os.path.realpath(path).rstrip("/") + "/"
    found, fstype = "", "?"
    try:
        mounts = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return fstype
    for line in mounts:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].rstrip("/") + "/"
        if target.startswith(point) and len(point) > len(found):
            found, fstype = point, fields[2]
    return fstype


@contextlib.contextmanager
def run_root() -> Iterator[Path]:
    """A temporary folder for every run directory of one benchmark, removed when all are done."""
    with tempfile.TemporaryDirectory(prefix="polis-bench-") as tmp:
        root = Path(tmp)
        print(f"run directories: {root} ({filesystem(root)})")
        yield root
