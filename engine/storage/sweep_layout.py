"""The on-disk layout of a parameter sweep, shared by the sweep runner (writes) and the reader.

A sweep root holds ``SWEEP.json`` (the manifest, written once when the sweep starts),
``SWEEP_LOG.jsonl`` (each cell's status changes, appended as they happen: a cell's last line wins)
and one ordinary run directory per cell::

    <root>/SWEEP.json
    <root>/SWEEP_LOG.jsonl
    <root>/cells/cell=0000/replay/<dataset>/*.parquet
    <root>/cells/cell=0000/trace/*.jsonl
    <root>/cells/cell=0001/...

The ``cell=<index>`` directory names are hive partitions, so DuckDB reads the cell index from the
path. A cell's directory is always derived from its index, never from a path in the manifest, so
a tampered manifest cannot point the reader outside the root.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from engine.errors import StorageError
from engine.run_status import RunStatus
from engine.storage.atomic import read_json

__all__ = [
    "CELLS_DIR",
    "SWEEP_COLUMNS",
    "SWEEP_FILE",
    "SWEEP_LOG_FILE",
    "TIER_COMPARISON_FILE",
    "SweepLog",
    "SweepCellRecord",
    "SweepManifest",
    "cell_dir",
    "cells_table",
    "param_column",
    "read_sweep",
    "read_sweep_manifest",
]

#: The manifest file that marks a directory as a sweep root.
SWEEP_FILE = "SWEEP.json"
#: The cells' status changes, one JSON object per line: the cell's index and the fields that changed.
SWEEP_LOG_FILE = "SWEEP_LOG.jsonl"
#: The directory under the root holding one run directory per cell.
CELLS_DIR = "cells"
#: Columns every sweep view gains besides one ``param_*`` column per grid parameter.
SWEEP_COLUMNS = ("cell", "replication", "seed")
#: A sweep over tier mixes: its cost against fidelity, one row per mix (``engine.society.tiered.comparison``);
#: readers show it as the ``tier_comparison`` view.
TIER_COMPARISON_FILE = "comparison/tier_comparison.parquet"


def cell_dir(root: Path, index: int) -> Path:
    """Return the run directory of cell ``index`` (``<root>/cells/cell=0003``)."""
    return Path(root) / CELLS_DIR / f"cell={index:04d}"


def param_column(path: str) -> str:
    """Return the SQL column of a grid parameter: ``llm.default.options.temperature`` -> ``param_llm_default_options_temperature``."""
    return "param_" + re.sub(r"[^A-Za-z0-9_]", "_", path)


@dataclass(frozen=True)
class SweepCellRecord:
    """One cell as the manifest records it."""

    index: int  #: position in the sweep, 0-based; also the ``cell`` column
    cell_id: str  #: ``cell-0003``
    replication: int  #: 0-based replication of its parameter combination
    seed: int  #: the seed the cell ran with
    params: dict[str, Any]  #: grid path -> value
    status: RunStatus  #: pending | running | completed(_with_errors) | failed | cancelled | budget_exhausted
    error: str | None = None


@dataclass(frozen=True)
class SweepManifest:
    """What a reader needs from ``SWEEP.json``."""

    root: Path
    params: tuple[str, ...]  #: grid paths, in grid order
    cells: tuple[SweepCellRecord, ...]

    def cell_dir(self, index: int) -> Path:
        """Return the run directory of cell ``index``."""
        return cell_dir(self.root, index)


class SweepLog:
    """Appends cells' status changes to ``<root>/SWEEP_LOG.jsonl``: one short line per change, however many cells.

    Lines are flushed, not fsynced: a line lost to a crash leaves its cell at an earlier status, and a
    resumed sweep runs such a cell again as a resume of its own run directory.
    """

    def __init__(self, root: Path) -> None:
        self.path = Path(root) / SWEEP_LOG_FILE

    def record(self, index: int, **fields: Any) -> None:
        """Append cell ``index``'s new ``status`` (and ``error``, ``summary``)."""
        line = json.dumps({"index": index, **fields}, separators=(",", ":"), default=str) + "\n"
        with open(self.path, "a", encoding="utf-8") as log:
            log.write(line)


def _fold_log(root: Path, cells: list[dict[str, Any]]) -> None:
    try:
        with open(Path(root) / SWEEP_LOG_FILE, encoding="utf-8") as log:
            lines = log.readlines()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise StorageError(f"cannot read {Path(root) / SWEEP_LOG_FILE}: {exc}") from exc
    for number, line in enumerate(lines, 1):
        try:
            change = json.loads(line)
            cell = cells[int(change.pop("index"))]
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            if number == len(lines) and not line.endswith("\n"):
                break  # a line torn by a crash mid-append
            raise StorageError(f"{Path(root) / SWEEP_LOG_FILE} line {number} is malformed: {exc!r}") from exc
        cell.update(change)


def read_sweep(root: Path) -> dict[str, Any] | None:
    """Read ``<root>/SWEEP.json`` with each cell's status, error and summary as the log last recorded them.

    Returns:
        The manifest document (``cells[i]["status"]`` current), or None when ``root`` is not a sweep root.

    Raises:
        StorageError: the manifest or the log is unreadable or malformed.
    """
    doc = read_json(Path(root) / SWEEP_FILE, default=None)
    if doc is None:
        return None
    try:
        cells = doc["cells"]
    except (KeyError, TypeError) as exc:
        raise StorageError(f"{Path(root) / SWEEP_FILE} is malformed: {exc!r}") from exc
    _fold_log(root, cells)
    return doc


def read_sweep_manifest(root: Path) -> SweepManifest | None:
    """Read ``<root>/SWEEP.json`` and its log; None when ``root`` is not a sweep root.

    Raises:
        StorageError: the manifest or the log exists but is unreadable or malformed.
    """
    root = Path(root)
    doc = read_sweep(root)
    if doc is None:
        return None
    try:
        params = tuple(str(p) for p in doc["grid"])
        cells = tuple(
            SweepCellRecord(
                index=int(c["index"]), cell_id=str(c["cell_id"]), replication=int(c["replication"]),
                seed=int(c["seed"]), params=dict(c["params"]), status=RunStatus(c["status"]), error=c.get("error"),
            )
            for c in doc["cells"]
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise StorageError(f"{root / SWEEP_FILE} is malformed: {exc!r}") from exc
    if [c.index for c in cells] != list(range(len(cells))):
        raise StorageError(f"{root / SWEEP_FILE} is malformed: cell indexes are not 0..{len(cells) - 1} in order")
    return SweepManifest(root=root, params=params, cells=cells)


def _param_array(values: list[Any]) -> pa.Array:
    # One SQL type per parameter: the values' common scalar type, else their JSON text; None is null.
    present = [v for v in values if v is not None]
    if present and all(isinstance(v, bool) for v in present):
        return pa.array(values, pa.bool_())
    if present and all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        return pa.array(values, pa.int64())
    if present and all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        return pa.array([None if v is None else float(v) for v in values], pa.float64())
    if all(isinstance(v, str) for v in present):
        return pa.array(values, pa.string())
    return pa.array([None if v is None else json.dumps(v, sort_keys=True, default=str) for v in values], pa.string())


def cells_table(manifest: SweepManifest) -> pa.Table:
    """Return one row per cell: ``cell``, ``cell_id``, ``replication``, ``seed``, ``param_*``, ``status``, ``error``.

    A parameter whose values share a scalar type (bool, integer, number, string) gets that type;
    any other parameter holds each value's JSON text.
    """
    cells = manifest.cells
    columns: dict[str, pa.Array] = {
        "cell": pa.array([c.index for c in cells], pa.int64()),
        "cell_id": pa.array([c.cell_id for c in cells], pa.string()),
        "replication": pa.array([c.replication for c in cells], pa.int64()),
        "seed": pa.array([c.seed for c in cells], pa.int64()),
    }
    for path in manifest.params:
        columns[param_column(path)] = _param_array([c.params.get(path) for c in cells])
    columns["status"] = pa.array([str(c.status) for c in cells], pa.string())
    columns["error"] = pa.array([c.error for c in cells], pa.string())
    return pa.table(columns)
