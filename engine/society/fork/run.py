"""fork_experiment: make a fork's run directory and run it (on a Dask client or a shell; the CLI's and the service's door)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from engine.errors import SpecError
from engine.society.fork.materialize import ForkReport, materialize_fork, plan_fork
from engine.society.run.runner import RunSummary, run_experiment
from engine.spec import read_document
from engine.storage.run_layout import RunLocation

__all__ = ["fork_experiment", "load_patch"]


def load_patch(path: str | Path) -> dict[str, Any]:
    """A fork's spec patch from a YAML or JSON file: a mapping merged into the parent's spec.

    Raises:
        SpecError: unreadable file, bad syntax, or not a mapping.
    """
    data = read_document(path, "the patch file")
    if not isinstance(data, dict):
        raise SpecError(f"{path}: a patch is a mapping of spec fields (merged into the parent's spec), not {type(data).__name__}")
    return data


async def fork_experiment(parent: RunLocation, at_step: int, run_dir: RunLocation, cluster: Any, *, patch: dict[str, Any] | None = None,
                          **options: Any) -> tuple[ForkReport, RunSummary]:
    """Fork ``parent`` at its committed tick ``at_step`` into ``run_dir`` and run the fork's remaining steps.

    ``options`` go to :func:`~engine.society.run.runner.run_experiment` (not ``resume``).

    Raises:
        SpecError: a patch that does not make a valid fork (with its field path).
        ForkError: the tick is not kept, the parent is running, or ``run_dir`` holds something.
        StorageError: the parent's replay cannot be read (the fork's lineage names its run ids).
    """
    point, fork = await asyncio.to_thread(plan_fork, parent, at_step, patch)
    report = await asyncio.to_thread(materialize_fork, point, fork, run_dir)
    summary = await run_experiment(fork.spec, report.run_dir, cluster, resume=True, **options)
    return report, summary
