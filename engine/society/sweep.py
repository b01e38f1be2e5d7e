"""Parameter sweeps: a spec's grid expanded into cells, each an ordinary run in its own directory.

Expansion (:func:`expand_sweep`) is sans-IO: the cartesian product of the grid's values, each
combination repeated ``replications`` times, in a stable order (the first grid key varies slowest,
the replication fastest). Every cell gets a seed derived by hashing (spec seed, params,
replication), so rerunning a sweep reproduces each cell. :func:`run_sweep` is the shell: it writes
``SWEEP.json`` and runs every cell concurrently with :func:`run_experiment` on one cluster; the
layout (``cells/cell=0003``) is :mod:`engine.storage.sweep_layout`, which the reader also uses.
"""

from __future__ import annotations

import asyncio
import copy
import hashlib
import itertools
import json
import math
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distributed import Client
from pydantic import BaseModel

from engine.errors import RunError, SpecError
from engine.society.runner import RunProgress, RunSummary, run_experiment
from engine.spec import ExperimentSpec, parse_spec
from engine.storage.atomic import atomic_write_json
from engine.storage.sweep_layout import CELLS_DIR, SWEEP_FILE, cell_dir, param_column

__all__ = ["MAX_CELLS", "SweepCell", "SweepSummary", "check_grid_keys", "derive_seed", "expand_sweep", "run_sweep"]

#: The most cells one sweep may expand to.
MAX_CELLS = 10_000
_SEED_BITS = 31  # every consumer takes a seed this size (numpy wants < 2**32, some providers int32)
_KEY = re.compile(r"[^.\s]+(\.[^.\s]+)*")
_UNSWEEPABLE = {"seed": "each cell's seed is derived from the spec's seed; sweep replications instead",
                "sweep": "a sweep cannot sweep itself"}

Segment = str | int


@dataclass(frozen=True)
class SweepCell:
    """One cell of a sweep: a parameter combination and replication, ready to run."""

    index: int  #: position in the sweep, 0-based; the ``cell`` column of the sweep's datasets
    cell_id: str  #: ``cell-0003``
    params: dict[str, Any]  #: grid path -> value
    replication: int  #: 0-based
    seed: int  #: derived from (spec seed, params, replication); the cell spec's ``seed``
    spec: ExperimentSpec  #: the base spec with params applied, seed set, name suffixed, no sweep

    def run_dir(self, root: Path) -> Path:
        """Return this cell's run directory under the sweep root."""
        return cell_dir(root, self.index)


@dataclass(frozen=True)
class SweepSummary:
    """How every cell of a sweep ended."""

    root: Path
    cells: tuple[SweepCell, ...]
    runs: tuple[RunSummary, ...]  #: one per cell, same order

    def statuses(self) -> dict[str, int]:
        """Return how many cells ended in each status."""
        return dict(Counter(run.status for run in self.runs))


def _resolve(node: Any, segments: list[str], where: str) -> list[tuple[Segment, ...]]:
    """Concrete paths (``*`` expanded) that ``segments`` reach from ``node``; ValueError if none can."""
    if not segments:
        return [()]
    seg, rest = segments[0], segments[1:]
    here = f"{where}.{seg}"
    if node is None:
        raise ValueError(f"{where} is not set (null), so it has no {seg!r}; sweep {where!r} with whole values instead")
    if isinstance(node, BaseModel):
        fields = type(node).model_fields
        if seg not in fields:
            raise ValueError(f"{where} has no field {seg!r}; its fields: {', '.join(fields)}")
        return [(seg, *p) for p in _resolve(getattr(node, seg), rest, here)]
    if isinstance(node, Mapping):
        if seg == "*":
            raise ValueError(f"{where} is a mapping; '*' ranges over list elements only")
        if seg in node:
            return [(seg, *p) for p in _resolve(node[seg], rest, here)]
        if not rest:
            return [(seg,)]  # a new key in a free-form mapping (options, kwargs, config, ...)
        raise ValueError(f"{where} has no key {seg!r}")
    if isinstance(node, list | tuple):
        if seg == "*":
            if not node:
                raise ValueError(f"{where} is empty, so '*' matches nothing")
            indices: list[int] = list(range(len(node)))
        elif seg.isdigit() and int(seg) < len(node):
            indices = [int(seg)]
        else:
            raise ValueError(f"{where} is a list of {len(node)}; {seg!r} is neither an index below {len(node)} nor '*'")
        return [(i, *p) for i in indices for p in _resolve(node[i], rest, f"{where}.{i}")]
    raise ValueError(f"{where} is a {type(node).__name__} value, which has no {seg!r}")


def _overlap(a: str, b: str) -> bool:
    pairs = list(zip(a.split("."), b.split("."), strict=False))
    return all(x == y or "*" in (x, y) for x, y in pairs)


def check_grid_keys(grid: Mapping[str, Any], fields: Mapping[str, Any]) -> dict[str, list[tuple[Segment, ...]]]:
    """Check that every grid key is a sweepable path and resolve it.

    Args:
        grid: the sweep grid (path -> values).
        fields: the spec's top-level fields by name (an ``ExperimentSpec``'s, or the validated
            ones during validation; keys whose first field is absent are skipped).

    Returns:
        Each resolved key's concrete paths (``*`` expanded).

    Raises:
        ValueError: a key is malformed, unsweepable, does not resolve, overlaps another key, or
            maps to the same SQL column as another key. The message names the key.
    """
    resolved: dict[str, list[tuple[Segment, ...]]] = {}
    columns: dict[str, str] = {}
    for key in grid:
        if not _KEY.fullmatch(key):
            raise ValueError(f"grid key {key!r} is not a dotted path such as 'population.0.count'")
        first, *rest = key.split(".")
        if first in _UNSWEEPABLE:
            raise ValueError(f"grid key {key!r}: {_UNSWEEPABLE[first]}")
        if first not in ExperimentSpec.model_fields:
            raise ValueError(f"grid key {key!r}: the spec has no field {first!r}; its fields: {', '.join(ExperimentSpec.model_fields)}")
        clash = columns.setdefault(param_column(key).lower(), key)
        if clash != key:
            raise ValueError(f"grid keys {clash!r} and {key!r} both become column {param_column(key)!r}")
        for other in resolved:
            if _overlap(other, key):
                raise ValueError(f"grid keys {other!r} and {key!r} overlap: one sets part of the other")
        if first in fields:
            try:
                resolved[key] = [(first, *p) for p in _resolve(fields[first], rest, first)]
            except ValueError as error:
                raise ValueError(f"grid key {key!r} does not resolve: {error}") from None
    return resolved


def derive_seed(base_seed: int, params: Mapping[str, Any], replication: int, salt: int = 0) -> int:
    """Return a cell's seed: a hash of (base seed, params, replication), in ``[0, 2**31)``.

    ``salt`` moves past a collision with an earlier cell's seed.
    """
    payload = json.dumps({"seed": base_seed, "params": dict(params), "replication": replication, "salt": salt},
                         sort_keys=True, default=str, separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(payload.encode()).digest()[:8], "big") >> (64 - _SEED_BITS)


def _assign(data: Any, path: tuple[Segment, ...], value: Any) -> None:
    for segment in path[:-1]:
        data = data[segment]
    data[path[-1]] = copy.deepcopy(value)


def expand_sweep(spec: ExperimentSpec) -> list[SweepCell]:
    """Expand a spec's sweep into its cells, each with a validated spec.

    Args:
        spec: a spec with a ``sweep``.

    Returns:
        ``len(product of grid values) * replications`` cells, index order.

    Raises:
        SpecError: no sweep, too many cells, a key that does not resolve (path ``sweep``), or a
            value that makes an invalid spec (the message names the cell and its params).
    """
    if spec.sweep is None:
        raise SpecError("the spec declares no sweep", path="sweep")
    grid, replications = spec.sweep.grid, spec.sweep.replications
    total = replications * math.prod(len(values) for values in grid.values())
    if total > MAX_CELLS:
        raise SpecError(f"the sweep expands to {total} cells; at most {MAX_CELLS} are allowed", path="sweep")
    try:
        targets = check_grid_keys(grid, {name: getattr(spec, name) for name in type(spec).model_fields})
    except ValueError as error:
        raise SpecError(str(error), path="sweep") from None
    base = spec.model_dump(mode="json", exclude={"sweep"})
    cells: list[SweepCell] = []
    seeds: set[int] = set()
    for combo in itertools.product(*grid.values()):
        params = dict(zip(grid, combo, strict=True))
        for replication in range(replications):
            index = len(cells)
            cell_id = f"cell-{index:04d}"
            salt = 0
            while (seed := derive_seed(spec.seed, params, replication, salt)) in seeds:
                salt += 1
            seeds.add(seed)
            data = copy.deepcopy(base)
            for key, value in params.items():
                for path in targets[key]:
                    _assign(data, path, value)
            suffix = f"-{cell_id}"
            data.update(seed=seed, name=spec.name[: 200 - len(suffix)] + suffix)
            try:
                cell_spec = parse_spec(data)
            except SpecError as error:
                wrapped = SpecError(f"sweep {cell_id} ({_describe(params)}) is not a valid spec:\n{error}")
                wrapped.path = error.path
                raise wrapped from None
            cells.append(SweepCell(index, cell_id, params, replication, seed, cell_spec))
    return cells


def _describe(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in params.items()) or "no params"


def _manifest(spec: ExperimentSpec, cells: list[SweepCell]) -> dict[str, Any]:
    assert spec.sweep is not None
    return {
        "name": spec.name,
        "spec_hash": spec.spec_hash(),
        "spec": spec.model_dump(mode="json"),
        "grid": spec.sweep.model_dump(mode="json")["grid"],
        "replications": spec.sweep.replications,
        "columns": {key: param_column(key) for key in spec.sweep.grid},
        "cells": [
            {
                "index": c.index, "cell_id": c.cell_id, "params": c.params, "replication": c.replication,
                "seed": c.seed, "spec_hash": c.spec.spec_hash(), "run_dir": f"{CELLS_DIR}/{cell_dir(Path(), c.index).name}",
                "status": "pending", "error": None, "summary": None,
            }
            for c in cells
        ],
    }


async def run_sweep(
    spec: ExperimentSpec,
    root: Path,
    client: Client,
    *,
    max_concurrent_cells: int | None = None,
    on_progress: Callable[[SweepCell, RunProgress], None] | None = None,
    **run_kwargs: Any,
) -> SweepSummary:
    """Run every cell of ``spec``'s sweep on one cluster; a failed cell does not stop the others.

    ``root/SWEEP.json`` records the base spec, the grid and each cell's params, seed, run
    directory and status; it is rewritten as cells start and finish.

    Args:
        spec: a spec with a ``sweep``.
        root: the sweep root; must not hold a sweep already.
        client: an asynchronous distributed Client, shared by all cells.
        max_concurrent_cells: run at most this many cells at once (default: all).
        on_progress: called with the cell and its progress on every batch and tick.
        **run_kwargs: passed to :func:`run_experiment` for every cell (``llm_limits``, ...).

    Returns:
        Every cell and its run summary.

    Raises:
        SpecError: the sweep does not expand (see :func:`expand_sweep`).
        RunError: ``root`` already holds a sweep.
        asyncio.CancelledError: the sweep was cancelled (unfinished cells are recorded as cancelled).
    """
    root = Path(root)
    cells = expand_sweep(spec)
    if (root / SWEEP_FILE).exists():
        raise RunError(f"{root} already holds a sweep ({SWEEP_FILE}); choose a new directory")
    manifest = _manifest(spec, cells)
    atomic_write_json(root / SWEEP_FILE, manifest, indent=2)
    gate = asyncio.Semaphore(max_concurrent_cells or len(cells))

    def record(cell: SweepCell, **fields: Any) -> None:
        manifest["cells"][cell.index].update(fields)
        atomic_write_json(root / SWEEP_FILE, manifest, indent=2)

    async def run_cell(cell: SweepCell) -> RunSummary:
        report = None if on_progress is None else (lambda progress: on_progress(cell, progress))
        async with gate:
            record(cell, status="running")
            started = time.perf_counter()
            try:
                run = await run_experiment(cell.spec, cell.run_dir(root), client, on_progress=report, **run_kwargs)
            except asyncio.CancelledError:
                record(cell, status="cancelled")
                raise
            except Exception as caught:  # noqa: BLE001 - one cell's failure is recorded; the others go on
                error = f"{type(caught).__name__}: {caught}"
                run = RunSummary("failed", cell.run_dir(root), 0, 0, 0, 0, 0, time.perf_counter() - started, error)
        record(cell, status=run.status, error=run.error, summary={
            "ticks_done": run.ticks_done, "agent_steps": run.agent_steps, "llm_calls": run.llm_calls,
            "input_tokens": run.input_tokens, "output_tokens": run.output_tokens, "duration_s": round(run.duration_s, 3),
        })
        return run

    tasks = [asyncio.ensure_future(run_cell(cell)) for cell in cells]
    try:
        runs = await asyncio.gather(*tasks)
    except asyncio.CancelledError:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for cell in cells:
            if manifest["cells"][cell.index]["status"] in {"pending", "running"}:
                record(cell, status="cancelled")
        raise
    return SweepSummary(root=root, cells=tuple(cells), runs=tuple(runs))
