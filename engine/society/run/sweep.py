"""Running a sweep: every cell an ordinary run in its own directory, all cells on one cluster.

``root/SWEEP.json`` records the base spec, the grid and each cell's params, seed and run directory,
written once; ``root/SWEEP_LOG.jsonl`` gets one line per cell status change (so a 10,000-cell sweep
never rewrites its manifest). Cells run a few at a time (``max_concurrent_cells``), each inside a
slot the caller may ration (the service's fair queue). A resumed sweep skips completed cells,
resumes cells that started, and starts the rest. :func:`run_sweep_as_run` folds a sweep into one
:class:`RunSummary` with combined progress, which is what the REST service runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import Counter
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from distributed import Client

from engine.errors import RunError, SpecError, StorageError
from engine.run_progress import RunProgress
from engine.run_status import RunStatus, is_finished
from engine.society.run.dashboard import experiment_span
from engine.society.run.manifest import sweep_manifest
from engine.society.run.runner import RunSummary, run_experiment
from engine.society.shells import Shell
from engine.society.status import has_society_step
from engine.society.tiered.comparison import write_tier_comparison
from engine.spec import ExperimentSpec
from engine.storage.atomic import atomic_write_json
from engine.storage.sweep_layout import CELLS_DIR, SWEEP_FILE, SweepLog, cell_dir, param_column, read_sweep
from engine.sweep import SweepCell, expand_sweep

__all__ = ["DEFAULT_CONCURRENT_CELLS", "CellSlot", "SweepSummary", "run_spec", "run_sweep", "run_sweep_as_run"]

#: Cells running at once when neither the caller nor the spec says (``sweep.max_concurrent_cells``).
DEFAULT_CONCURRENT_CELLS = 4
#: Entered around one cell's run; the cell waits in it for its turn (e.g. a slot of the service's queue).
CellSlot = Callable[[SweepCell], AbstractAsyncContextManager[Any]]
_ERRORS_SHOWN = 5
logger = logging.getLogger(__name__)  # cells' errors named in a sweep's summary


@dataclass(frozen=True)
class SweepSummary:
    """How every cell of a sweep ended."""

    root: Path
    cells: tuple[SweepCell, ...]
    runs: tuple[RunSummary, ...]  #: one per cell, same order

    def statuses(self) -> dict[str, int]:
        """Return how many cells ended in each status."""
        return dict(Counter(str(run.status) for run in self.runs))


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
                "status": RunStatus.PENDING, "error": None, "summary": None,
            }
            for c in cells
        ],
    }


def _open_manifest(spec: ExperimentSpec, cells: list[SweepCell], root: Path, resume: bool, force: bool) -> dict[str, Any]:
    """The sweep's manifest with its cells' current statuses; a new sweep's is written (blocking: call it in a thread)."""
    existing = read_sweep(root)
    if resume:
        if existing is None:
            raise RunError(f"{root} holds no sweep to resume ({SWEEP_FILE} missing)")
        if existing["spec_hash"] != spec.spec_hash() and not force:
            raise SpecError(f"the spec differs from the one the sweep in {root} was started with; pass --force to resume anyway")
        return existing
    if existing is not None:
        raise RunError(f"{root} already holds a sweep ({SWEEP_FILE}); resume it or choose a new directory")
    manifest = _manifest(spec, cells)
    root.mkdir(parents=True, exist_ok=True)
    atomic_write_json(root / SWEEP_FILE, manifest)
    sweep_manifest(root, spec, manifest["cells"])
    return manifest


def _done(cell: SweepCell, root: Path, entry: dict[str, Any]) -> RunSummary:
    summary = entry.get("summary") or {}
    return RunSummary(RunStatus(entry["status"]), cell.run_dir(root), summary.get("ticks_done", 0), summary.get("agent_steps", 0),
                      summary.get("llm_calls", 0), summary.get("input_tokens", 0), summary.get("output_tokens", 0), 0.0,
                      entry.get("error"), errors=summary.get("errors", 0))


async def run_sweep(
    spec: ExperimentSpec,
    root: Path,
    cluster: Client | Shell,
    *,
    max_concurrent_cells: int | None = None,
    cell_slot: CellSlot | None = None,
    on_progress: Callable[[SweepCell, RunProgress], None] | None = None,
    resume: bool = False,
    force: bool = False,
    experiment_id: str | None = None,
    **run_kwargs: Any,
) -> SweepSummary:
    """Run every cell of ``spec``'s sweep on one cluster; a failed cell does not stop the others.

    Cells start in index order, at most ``max_concurrent_cells`` at once, each once ``cell_slot`` lets it:
    a sweep of 10,000 cells holds a handful of cells in flight, not 10,000 waiting tasks.

    Args:
        spec: a spec with a ``sweep``.
        root: the sweep root.
        cluster: where every cell runs (as for :func:`~engine.society.run.runner.run_experiment`), shared by all cells.
        max_concurrent_cells: run at most this many cells at once (default: the spec's
            ``sweep.max_concurrent_cells``, else :data:`DEFAULT_CONCURRENT_CELLS`).
        cell_slot: entered around each cell's run, e.g. a slot of the service's fair queue shared with
            other owners' experiments; a cell waits in it before it starts. None: no wait.
        on_progress: called with the cell and its progress on every batch and tick.
        resume: continue the sweep in ``root``: completed cells are kept, started ones resumed.
        force: resume although the spec changed.
        experiment_id: the sweep's span on the Dask dashboard (default ``root``'s name); each cell's
            span (its ``cell_id``) nests in it, and the cell's task keys carry both.
        **run_kwargs: passed to :func:`run_experiment` for every cell (``llm_limits``, ...).

    Raises:
        SpecError: the sweep does not expand, or (resuming) the spec changed.
        RunError: ``root`` already holds a sweep (or, resuming, holds none).
        asyncio.CancelledError: the sweep was cancelled (cells that were running are recorded as
            cancelled; cells that never started stay pending).
    """
    cells = await asyncio.to_thread(expand_sweep, spec)
    return await _run_cells(spec, cells, Path(root), cluster, max_concurrent_cells=max_concurrent_cells, cell_slot=cell_slot,
                            on_progress=on_progress, resume=resume, force=force, experiment_id=experiment_id, **run_kwargs)


async def _run_cells(
    spec: ExperimentSpec,
    cells: list[SweepCell],
    root: Path,
    cluster: Client | Shell,
    *,
    max_concurrent_cells: int | None,
    cell_slot: CellSlot | None,
    on_progress: Callable[[SweepCell, RunProgress], None] | None,
    resume: bool,
    force: bool,
    experiment_id: str | None,
    **run_kwargs: Any,
) -> SweepSummary:
    assert spec.sweep is not None
    manifest = await asyncio.to_thread(_open_manifest, spec, cells, root, resume, force)
    log = SweepLog(root)
    slot = cell_slot or (lambda cell: contextlib.nullcontext())
    runs: list[RunSummary | None] = [None] * len(cells)

    def record(cell: SweepCell, **fields: Any) -> None:
        manifest["cells"][cell.index].update(fields)
        log.record(cell.index, **fields)

    async def run_cell(cell: SweepCell) -> RunSummary:
        entry = manifest["cells"][cell.index]
        if is_finished(entry["status"]):
            return _done(cell, root, entry)
        report = None if on_progress is None else (lambda progress: on_progress(cell, progress))
        async with slot(cell):
            started_before = has_society_step(cell.run_dir(root))
            record(cell, status=RunStatus.RUNNING)
            started = time.perf_counter()
            try:
                run = await run_experiment(cell.spec, cell.run_dir(root), cluster, on_progress=report,
                                           resume=started_before, force=force, experiment_id=cell.cell_id, **run_kwargs)
            except asyncio.CancelledError:
                record(cell, status=RunStatus.CANCELLED)
                raise
            except Exception as caught:  # noqa: BLE001 - one cell's failure is recorded; the others go on
                error = f"{type(caught).__name__}: {caught}"
                run = RunSummary(RunStatus.FAILED, cell.run_dir(root), 0, 0, 0, 0, 0, time.perf_counter() - started, error)
        record(cell, status=run.status, error=run.error, summary={
            "ticks_done": run.ticks_done, "agent_steps": run.agent_steps, "llm_calls": run.llm_calls,
            "input_tokens": run.input_tokens, "output_tokens": run.output_tokens, "duration_s": round(run.duration_s, 3),
            "errors": run.errors,
        })
        return run

    todo = iter(cells)

    async def lane() -> None:
        for cell in todo:  # lanes share the iterator: each takes the next cell as it frees
            runs[cell.index] = await run_cell(cell)

    width = min(max_concurrent_cells or spec.sweep.max_concurrent_cells or DEFAULT_CONCURRENT_CELLS, len(cells))
    with experiment_span(experiment_id or root.name):  # the cells' tasks start in it, their spans nest in it
        lanes = [asyncio.ensure_future(lane()) for _ in range(width)]
    try:
        await asyncio.gather(*lanes)
    except asyncio.CancelledError:
        for task in lanes:
            task.cancel()
        await asyncio.gather(*lanes, return_exceptions=True)
        raise
    try:
        await asyncio.to_thread(write_tier_comparison, root)  # a sweep over tier mixes: cost against fidelity
    except (StorageError, OSError) as error:  # the cells' results stand; the comparison can be written again
        logger.warning("%s: tier_comparison not written: %s", root, error)
    return SweepSummary(root=root, cells=tuple(cells), runs=tuple(run for run in runs if run is not None))


class _SweepProgress:
    """A sweep's progress: every cell's latest report, summed as reports come (constant work per report)."""

    _SUMMED = ("ticks_done", "agent_steps_done", "llm_calls", "input_tokens", "output_tokens", "cost_usd", "errors")

    def __init__(self, cells: list[SweepCell]) -> None:
        self.ticks_total = sum(c.spec.total_ticks() for c in cells)
        self.agent_steps_total = sum(c.spec.total_ticks() * len(c.spec.all_agents()) for c in cells)
        self._latest: dict[int, RunProgress] = {}
        self._sums = dict.fromkeys(self._SUMMED, 0.0)

    def update(self, cell: SweepCell, progress: RunProgress) -> RunProgress:
        before = self._latest.get(cell.index)
        self._latest[cell.index] = progress
        for name in self._SUMMED:
            self._sums[name] += getattr(progress, name) - (getattr(before, name) if before is not None else 0)
        sums = {name: int(value) for name, value in self._sums.items() if name != "cost_usd"}
        return RunProgress(
            RunStatus.STARTING if progress.status == RunStatus.STARTING else RunStatus.RUNNING,
            sums["ticks_done"], self.ticks_total, sums["agent_steps_done"], self.agent_steps_total,
            llm_calls=sums["llm_calls"], input_tokens=sums["input_tokens"], output_tokens=sums["output_tokens"],
            cost_usd=self._sums["cost_usd"], errors=sums["errors"],
            # the phase of the cell that reported last (a sweep's cells are in phases of their own)
            phase=progress.phase, phase_done=progress.phase_done, phase_total=progress.phase_total,
            phase_seconds=progress.phase_seconds,
        )


async def run_sweep_as_run(
    spec: ExperimentSpec,
    run_dir: Path,
    cluster: Client | Shell,
    *,
    on_progress: Callable[[RunProgress], None] | None = None,
    max_concurrent_cells: int | None = None,
    cell_slot: CellSlot | None = None,
    resume: bool = False,
    force: bool = False,
    experiment_id: str | None = None,
    **kwargs: Any,
) -> RunSummary:
    """A sweep with ``run_experiment``'s shape: progress summed over cells, one summary.

    The status is ``completed`` when every cell completed, else the first other status of a cell
    (``failed``, ``budget_exhausted``...), with each such cell's error (the first few, and how many more).
    """
    def expand() -> tuple[list[SweepCell], _SweepProgress]:
        cells = expand_sweep(spec)
        return cells, _SweepProgress(cells)

    cells, progress = await asyncio.to_thread(expand)  # 10,000 cells take a second or two

    def report(cell: SweepCell, latest: RunProgress) -> None:
        summed = progress.update(cell, latest)
        if on_progress is not None:
            on_progress(summed)

    started = time.perf_counter()
    sweep = await _run_cells(spec, cells, Path(run_dir), cluster, max_concurrent_cells=max_concurrent_cells, cell_slot=cell_slot,
                             on_progress=report, resume=resume, force=force, experiment_id=experiment_id, **kwargs)
    bad = [(cell, run) for cell, run in zip(sweep.cells, sweep.runs, strict=True) if run.status != RunStatus.COMPLETED]
    status = bad[0][1].status if bad else RunStatus.COMPLETED
    error = "; ".join(f"{cell.cell_id}: {run.status}: {run.error}" for cell, run in bad[:_ERRORS_SHOWN]) or None
    if len(bad) > _ERRORS_SHOWN:
        error = f"{error}; and {len(bad) - _ERRORS_SHOWN} more cells not completed"
    return RunSummary(
        status=status, run_dir=Path(run_dir), ticks_done=sum(r.ticks_done for r in sweep.runs),
        agent_steps=sum(r.agent_steps for r in sweep.runs), llm_calls=sum(r.llm_calls for r in sweep.runs),
        input_tokens=sum(r.input_tokens for r in sweep.runs), output_tokens=sum(r.output_tokens for r in sweep.runs),
        duration_s=time.perf_counter() - started, error=error,
    )


async def run_spec(spec: ExperimentSpec, run_dir: Path | str, cluster: Client | Shell, **kwargs: Any) -> RunSummary:
    """Run ``spec`` whatever it is: a sweep through :func:`run_sweep_as_run`, else :func:`run_experiment`.

    Raises:
        SpecError: a sweep into a URL (a sweep's root is a local directory for now).
    """
    if spec.sweep is None:
        return await run_experiment(spec, run_dir, cluster, **kwargs)
    if isinstance(run_dir, str):
        raise SpecError(f"sweep: a sweep's root is a local directory for now, not {run_dir}", path="sweep")
    return await run_sweep_as_run(spec, run_dir, cluster, **kwargs)
