"""A population's members: profiles drawn from a template, taken from a table's rows, or drawn by weight.

All are plain functions of the population's fields and a seed, so expanding the same spec twice
makes the same agents. The bounds here are checked before anything is expanded or read.

A draw by weight (a calibration's ``mode: draw``) is sampling with probability proportional to size:

- ``systematic`` (without replacement): row i is drawn with the inclusion probability
  ``pi_i = min(1, c * w_i)``, ``c`` chosen so that the ``pi_i`` sum to ``count`` (rows whose ``c * w_i``
  reaches 1 are taken for sure, and ``c`` is found again over the others, until none more reaches 1); then
  the rows, in a seeded random order, are laid end to end as intervals of length ``pi_i``, and the
  rows under the points ``u, u + 1, ..., u + count - 1`` (one uniform start ``u`` in (0, 1]) are drawn:
  exactly ``count`` rows, none twice, each with probability ``pi_i`` (Madow's systematic PPS over a
  random order). A share ``s`` of the weight then becomes, on average, a share ``s`` of the members,
  unless rows were taken for sure: their share is then below their weight's.
- ``with_replacement``: ``count`` independent draws, each row with probability ``w_i / sum(w)``; a row
  drawn twice stands for two members.

``numpy.random.Generator.choice(replace=False, p=w)``, what the draw was before, is neither: it draws
one row after another, each from the rows left, so the later draws come more and more from the rows the
weights disfavour (a pool of 1,000 with 30% in A raked to 70% A: 300 members drawn that way were 62% A).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import numpy as np

__all__ = ["MAX_POPULATION_CHARS", "MAX_POPULATION_ROWS", "DrawKind", "SampleKind", "chosen_rows", "draw_value",
           "draw_by_weight", "inclusion_probabilities", "table_profiles"]

#: The most characters a spec's populations may expand to (profiles and configs, as JSON), checked
#: before expanding; a population's table is bounded by it too (its decoded size, before rows are made).
MAX_POPULATION_CHARS = 256 * 1024 * 1024
#: The most members one population may have, and the most rows its table may hold.
MAX_POPULATION_ROWS = 1_000_000

#: How ``count`` rows are taken from a table: the first ones, or a seeded sample (kept in file order).
SampleKind = Literal["first", "random"]
#: How a calibration's ``mode: draw`` draws its members by weight (see the module docstring).
DrawKind = Literal["systematic", "with_replacement"]


def draw_value(value: Any, rng: random.Random, i: int, agent_id: int) -> Any:
    """One template value for member ``i``: a list draws one choice, a string is formatted with ``{i}`` and ``{id}``."""
    if isinstance(value, list):
        value = rng.choice(value)
    if isinstance(value, str):
        return value.format(i=i, id=agent_id)
    return value


def chosen_rows(rows: int, count: int, sample: SampleKind, seed_key: str) -> list[int]:
    """The indexes of the ``count`` of ``rows`` rows a population takes, in file order (see :func:`table_profiles`)."""
    if count > rows:
        raise ValueError(f"count {count} is more than the table's {rows} rows")
    if sample == "random" and count < rows:
        return sorted(random.Random(f"population-rows:{seed_key}").sample(range(rows), count))
    return list(range(count))


def table_profiles(
    rows: Sequence[Mapping[str, Any]], count: int, sample: SampleKind, columns: Sequence[str] | None, seed_key: str,
) -> list[dict[str, Any]]:
    """The profiles of ``count`` of ``rows``, in file order.

    Args:
        rows: the table's rows (validated: every value a string, finite number, boolean or null).
        count: how many rows to take, at most ``len(rows)`` (no row is repeated).
        sample: ``first`` takes the first ``count``; ``random`` a sample seeded by ``seed_key``.
        columns: the columns that become profile fields; None: every column of the row.
        seed_key: the sample's seed (the spec's seed and the population's index).

    Returns:
        One profile per chosen row. A null value leaves its field out: the row has no value there,
        and none is invented.
    """
    keys = list(columns) if columns is not None else None
    profiles = []
    for index in chosen_rows(len(rows), count, sample, seed_key):
        row = rows[index]
        picked = row.items() if keys is None else ((key, row.get(key)) for key in keys)
        profiles.append({key: value for key, value in picked if value is not None})
    return profiles


def inclusion_probabilities(weights: np.ndarray, count: int) -> np.ndarray:
    """Each row's probability ``min(1, c * w_i)`` of being among ``count`` rows drawn by weight, summing to ``count``.

    Raises:
        ValueError: a weight is negative or not finite, or fewer than ``count`` rows have a weight above 0.
    """
    weights = np.asarray(weights, dtype=np.float64)
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError("the weights to draw by must be finite and at least 0")
    if count > (positive := int(np.count_nonzero(weights))):
        raise ValueError(f"only {positive} rows have a weight above 0: {count} cannot be drawn from them without replacement")
    chances = np.zeros(len(weights))
    sure = np.zeros(len(weights), dtype=bool)
    while True:  # each round takes at least one more row for sure, or ends
        left = count - int(sure.sum())
        if left == 0:
            break
        rest = ~sure
        chances[rest] = weights[rest] * (left / weights[rest].sum())
        reached = rest & (chances >= 1)
        if not reached.any():
            break
        sure |= reached
    chances[sure] = 1.0
    return chances


def draw_by_weight(weights: np.ndarray, count: int, kind: DrawKind, rng: np.random.Generator) -> tuple[list[int], np.ndarray]:
    """``count`` rows drawn with probability proportional to ``weights`` (see the module docstring), in row order.

    Args:
        weights: each row's weight (at least 0).
        count: the rows to draw.
        kind: ``systematic`` (no row twice) or ``with_replacement`` (a row may come up again).
        rng: the seeded generator: the same one gives the same rows.

    Returns:
        The rows drawn, sorted (a row drawn twice is there twice), and each row's expected number of draws
        (its inclusion probability, without replacement).

    Raises:
        ValueError: as :func:`inclusion_probabilities` (without replacement), or no weight is above 0.
    """
    weights = np.asarray(weights, dtype=np.float64)
    if kind == "with_replacement":
        if not np.all(np.isfinite(weights)) or np.any(weights < 0) or not weights.sum() > 0:
            raise ValueError("the weights to draw by must be finite, at least 0, and not all 0")
        shares = weights / weights.sum()
        return sorted(rng.choice(len(weights), size=count, replace=True, p=shares).tolist()), shares * count
    chances = inclusion_probabilities(weights, count)
    order = rng.permutation(len(weights))
    ends = np.cumsum(chances[order])
    ends[np.flatnonzero(chances[order])[-1]:] = count  # the sum is count but for rounding: no point falls past it
    points = (1.0 - rng.random()) + np.arange(count)  # u in (0, 1], then u + 1, ...
    drawn = order[np.minimum(np.searchsorted(ends, points, side="left"), len(order) - 1)]
    return sorted(drawn.tolist()), chances
