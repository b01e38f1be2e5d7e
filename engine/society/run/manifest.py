"""``MANIFEST.json``: what a run ran on, written at its end and rewritten by each resume.

It holds the Polis version and, when Polis runs from a git checkout, its commit and whether the
checkout was dirty; Python and the key packages' versions; the spec hash and seed; and per
requested model the served model ids and ``system_fingerprint`` s the provider returned, with
counts, read from the committed ``llm_calls`` rows with DuckDB. A cached call counts under what the
cache stored. When a resume's served models differ from those the previous manifest recorded,
:func:`served_changes` says how, and the runner warns.

A sweep's root gets a manifest too: the same environment, the base spec's hash, and each cell's
seed and manifest path (each cell's run writes its own).
"""

from __future__ import annotations

import importlib.metadata
import platform
import subprocess
from pathlib import Path
from typing import Any

from engine.society.status import read_society
from engine.spec import ExperimentSpec
from engine.storage.atomic import atomic_write_json
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import MANIFEST_FILE, RunLocation, run_store

__all__ = [
    "KEY_PACKAGES",
    "MANIFEST_FILE",
    "environment",
    "read_manifest",
    "served_changes",
    "served_models",
    "source_revision",
    "sweep_manifest",
    "write_run_manifest",
]

#: The packages whose versions a manifest records (read from their metadata: nothing is imported).
KEY_PACKAGES = ("dask", "distributed", "litellm", "pydantic", "pyarrow", "duckdb", "fastapi", "aiohttp")
#: The folder holding the ``engine`` package: a git checkout's root when Polis runs from one.
_SOURCE_ROOT = Path(__file__).resolve().parents[3]


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _git(*argv: str) -> str | None:
    try:
        done = subprocess.run(["git", "-C", str(_SOURCE_ROOT), *argv], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def source_revision() -> dict[str, Any]:
    """The git commit Polis runs from and whether tracked files differ from it (both None: not a checkout)."""
    commit = _git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    changes = _git("status", "--porcelain", "--untracked-files=no")
    return {"commit": commit, "dirty": None if changes is None else bool(changes)}


def environment() -> dict[str, Any]:
    """Polis's version and revision, Python's version and the key packages' versions (None: not installed)."""
    return {
        "polis": {"version": _version("polis"), **source_revision()},
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in KEY_PACKAGES},
    }


def served_models(run_dir: RunLocation) -> dict[str, dict[str, Any]]:
    """Per requested model: its answered calls, and the counts per served id and per fingerprint.

    Args:
        run_dir: a run directory with committed ``llm_calls`` rows (none: an empty result).

    Returns:
        ``{requested: {"calls": n, "cached": n, "served": {id: n}, "fingerprints": {fp: n}}}``; a
        call whose reply named no model or fingerprint counts under ``"null"``.
    """
    with ReplayReader(run_dir) as reader:
        if "llm_calls" not in reader.datasets():
            return {}
        names = {column.name for column in reader.schema("llm_calls").columns}
        served = "served_model" if "served_model" in names else "NULL"  # a run written before the column
        fingerprint = "system_fingerprint" if "system_fingerprint" in names else "NULL"
        rows = reader.query(
            f"SELECT model, {served} AS served, {fingerprint} AS fingerprint, count(*) AS calls, "
            "count(*) FILTER (WHERE cached) AS cached FROM llm_calls WHERE status = 'ok' "
            "GROUP BY ALL ORDER BY model, served NULLS LAST, fingerprint NULLS LAST"
        ).to_pylist()
    models: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = models.setdefault(row["model"], {"calls": 0, "cached": 0, "served": {}, "fingerprints": {}})
        entry["calls"] += row["calls"]
        entry["cached"] += row["cached"]
        for key, value in (("served", row["served"]), ("fingerprints", row["fingerprint"])):
            label = "null" if value is None else str(value)
            entry[key][label] = entry[key].get(label, 0) + row["calls"]
    return models


def read_manifest(directory: RunLocation) -> dict[str, Any] | None:
    """The manifest in ``directory`` (None: it has none)."""
    found: dict[str, Any] | None = run_store(directory).get_json(MANIFEST_FILE, None)
    return found


def served_changes(previous: dict[str, Any] | None, current: dict[str, Any]) -> list[str]:
    """How the served models of ``current`` differ from those ``previous`` recorded, one line per model.

    A requested model the previous manifest knew that is now also served by an id (or fingerprint) it
    never recorded is a change; a model new to the run is not (nothing served it before).
    """
    if not previous:
        return []
    lines = []
    for requested, now in current.get("models", {}).items():
        before = previous.get("models", {}).get(requested)
        if not before:
            continue
        for key, what in (("served", "served model"), ("fingerprints", "system_fingerprint")):
            new = sorted(set(now[key]) - set(before[key]))
            if new:
                lines.append(f"{requested}: {what} {', '.join(new)} was not in the previous manifest "
                             f"({', '.join(sorted(before[key]))}); answers may differ from the earlier part of the run")
    return lines


def write_run_manifest(run_dir: RunLocation, spec: ExperimentSpec) -> list[str]:
    """Write ``run_dir/MANIFEST.json`` from the run's committed calls; return :func:`served_changes` lines.

    Args:
        run_dir: the run directory.
        spec: the spec the run ran (a sweep cell's: its seed is the cell's).
    """
    previous = read_manifest(run_dir)
    manifest = {
        **environment(),
        "spec_hash": spec.spec_hash(),
        "seed": spec.seed,
        "models": served_models(run_dir),
        "fork": (read_society(run_dir) or {}).get("fork"),  #: a fork's lineage, else None
    }
    run_store(run_dir).set_json(MANIFEST_FILE, manifest, indent=2)
    return served_changes(previous, manifest)


def sweep_manifest(root: Path, spec: ExperimentSpec, cells: list[dict[str, Any]]) -> None:
    """Write a sweep root's manifest: the environment, the base spec's hash and seed, and its cells.

    Args:
        root: the sweep root.
        spec: the sweep's spec.
        cells: ``SWEEP.json``'s cell entries (index, cell id, params, seed, run directory).
    """
    atomic_write_json(Path(root) / MANIFEST_FILE, {
        **environment(),
        "spec_hash": spec.spec_hash(),
        "seed": spec.seed,
        "cells": [{"index": c["index"], "cell_id": c["cell_id"], "params": c["params"], "seed": c["seed"],
                   "spec_hash": c["spec_hash"], "manifest": f"{c['run_dir']}/{MANIFEST_FILE}"} for c in cells],
    }, indent=2)
