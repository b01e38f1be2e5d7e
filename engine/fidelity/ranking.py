"""Which setup reproduces the survey best: a sweep's cells scored by a fidelity metric and ranked, with intervals.

Each cell of the sweep (a run) is scored by :func:`~engine.fidelity.report.fidelity` (its ``fidelity``
dataset is written, so the sweep's own ``fidelity`` view holds every cell's figures). Cells that differ
only by replication are one setup: its value is the mean over its replications, and its interval is
the t-interval of that mean over the replications (the seeds' spread), or the single cell's bootstrap
interval when it has one replication. Setups are ranked best first: highest for agreement metrics
(``accuracy``, ``normalized_accuracy``, ``item_normalized_accuracy``, ``spearman``, ``coverage``), lowest for distances.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scipy.stats import t as student_t

from engine.errors import FidelityError
from engine.fidelity.report import fidelity, survey_codebook
from engine.run_status import is_finished
from engine.storage.sweep_layout import read_sweep_manifest

__all__ = ["HIGHER_IS_BETTER", "SetupScore", "rank_sweep"]

#: Metrics where more is better; every other one is a distance.
HIGHER_IS_BETTER = frozenset({"accuracy", "normalized_accuracy", "item_normalized_accuracy", "spearman", "coverage"})


@dataclass(frozen=True)
class SetupScore:
    """One setup of the sweep (a combination of its grid's values) and its score."""

    rank: int
    params: dict[str, Any]
    value: float | None  #: the mean over its replications
    ci_low: float | None
    ci_high: float | None
    spread: float | None  #: the standard deviation over its replications (None with one)
    replications: int
    cells: tuple[int, ...]


def _interval(values: list[float], single: tuple[float | None, float | None]) -> tuple[float | None, float | None, float | None]:
    if len(values) == 1:
        return single[0], single[1], None
    mean = sum(values) / len(values)
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
    half = float(student_t.ppf(0.975, len(values) - 1)) * sd / math.sqrt(len(values))
    return mean - half, mean + half, sd


def rank_sweep(root: Path, *, metric: str = "accuracy", item: str | None = None, bootstrap: int = 200, seed: int = 0) -> list[SetupScore]:
    """Score every finished cell of the sweep at ``root`` and rank its setups by ``metric`` of ``item``.

    Raises:
        FidelityError: ``root`` is no sweep, no cell finished, ``item`` is needed (several target items) or unknown,
            or a cell cannot be scored.
    """
    sweep = read_sweep_manifest(root)
    if sweep is None:
        raise FidelityError(f"{root} is no sweep: rank the cells of a sweep's root")
    finished = [cell for cell in sweep.cells if is_finished(cell.status)]
    if not finished:
        raise FidelityError(f"no cell of the sweep at {root} has finished")
    codebook = survey_codebook(sweep.cell_dir(finished[0].index))
    items = [codebook.target_name(column) for column in codebook.targets]
    if item is None and len(items) > 1:
        raise FidelityError(f"the survey has {len(items)} target items ({', '.join(items)}): name the one to rank by")
    item = item or items[0]
    if item not in items:
        raise FidelityError(f"{item!r} is no target item of the survey ({', '.join(items)})")
    by_setup: dict[str, list[tuple[int, float | None, float | None, float | None]]] = defaultdict(list)
    params: dict[str, dict[str, Any]] = {}
    for cell in finished:
        report = fidelity(sweep.cell_dir(cell.index), bootstrap=bootstrap, seed=seed)
        try:
            figure = report.get(item, metric)
        except KeyError:
            raise FidelityError(f"cell {cell.cell_id} has no {metric!r} figure for {item!r}") from None
        key = json.dumps(cell.params, sort_keys=True, default=str)
        params[key] = cell.params
        by_setup[key].append((cell.index, figure.value, figure.ci_low, figure.ci_high))
    scores = []
    for key, found in by_setup.items():
        values = [v for _, v, _, _ in found if v is not None]
        mean = sum(values) / len(values) if values else None
        low, high, spread = _interval(values, (found[0][2], found[0][3])) if values else (None, None, None)
        scores.append((params[key], mean, low, high, spread, len(found), tuple(i for i, *_ in found)))
    better = metric in HIGHER_IS_BETTER
    scores.sort(key=lambda s: (s[1] is None, -(s[1] or 0.0) if better else (s[1] or 0.0)))
    return [SetupScore(rank, *score) for rank, score in enumerate(scores, 1)]
