"""Raking: survey weights that make a sample's persona fields match given marginal shares (census tables).

Iterative proportional fitting on the respondents themselves: each round scales, variable by variable,
every respondent's weight by the target share of its category over the share the weights give it now,
until every margin is within ``tolerance`` (or ``max_iter`` rounds pass). Sans-IO and numpy only.

The fit report gives each margin's target, its share before (the base weights) and after, the largest
error left, and the weights' spread: Kish's design effect ``n * sum(w^2) / sum(w)^2`` and the effective
sample size ``sum(w)^2 / sum(w^2)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["CalibrationReport", "MarginFit", "rake"]


@dataclass(frozen=True)
class MarginFit:
    """One category of one variable: the share it should have and the shares it had and has."""

    variable: str
    category: str
    target: float
    before: float
    after: float


@dataclass(frozen=True)
class CalibrationReport:
    """How well the raked weights fit the margins, and what they cost in precision."""

    margins: tuple[MarginFit, ...]
    iterations: int
    converged: bool
    max_error: float  #: the largest |after - target| over every category
    design_effect: float  #: Kish's, of the raked weights
    effective_n: float
    n: int


def _shares(codes: np.ndarray, weights: np.ndarray, k: int) -> np.ndarray:
    totals = np.bincount(codes, weights=weights, minlength=k)
    return totals / totals.sum()


def rake(categories: Mapping[str, Sequence[str]], targets: Mapping[str, Mapping[str, float]], base: np.ndarray, *,
         max_iter: int = 200, tolerance: float = 1e-6) -> tuple[np.ndarray, CalibrationReport]:
    """Weights for ``base`` (one per respondent) that match ``targets``.

    Args:
        categories: variable -> each respondent's category (every one among the variable's targets).
        targets: variable -> category -> share (the shares of a variable sum to 1).
        base: the starting weights (the survey's, or ones).

    Raises:
        ValueError: a respondent's category has no target, or a target category no respondent (with weight) has.
    """
    n = len(base)
    codes: dict[str, np.ndarray] = {}
    wanted: dict[str, np.ndarray] = {}
    for variable, shares in targets.items():
        order = list(shares)
        place = {category: i for i, category in enumerate(order)}
        found = categories[variable]
        if unknown := next((c for c in found if c not in place), None):
            raise ValueError(f"{variable}: a respondent's {unknown!r} has no target share; targets: {', '.join(order)}")
        codes[variable] = np.array([place[c] for c in found], dtype=np.int64)
        wanted[variable] = np.array([shares[c] for c in order], dtype=float)
        present = np.bincount(codes[variable], weights=base, minlength=len(order)) > 0
        if missing := [c for c, here, share in zip(order, present, wanted[variable], strict=True) if share > 0 and not here]:
            raise ValueError(f"{variable}: no respondent is {missing[0]!r}, whose target share is {shares[missing[0]]}")
    before = {v: _shares(codes[v], base, len(wanted[v])) for v in targets}
    weights = base.astype(float).copy()
    iterations, error = 0, np.inf
    while iterations < max_iter:
        iterations += 1
        for variable in targets:
            now = _shares(codes[variable], weights, len(wanted[variable]))
            factor = np.divide(wanted[variable], now, out=np.zeros_like(now), where=now > 0)
            weights *= factor[codes[variable]]
        error = max(float(np.abs(_shares(codes[v], weights, len(wanted[v])) - wanted[v]).max()) for v in targets)
        if error < tolerance:
            break
    weights *= n / weights.sum()  # mean weight 1: as many respondents as there are
    margins = tuple(
        MarginFit(variable, category, float(wanted[variable][i]), float(before[variable][i]), float(after[i]))
        for variable in targets
        for after in [_shares(codes[variable], weights, len(wanted[variable]))]
        for i, category in enumerate(targets[variable])
    )
    squares = float((weights ** 2).sum())
    report = CalibrationReport(margins, iterations, error < tolerance, float(error), n * squares / float(weights.sum()) ** 2,
                               float(weights.sum()) ** 2 / squares, n)
    return weights, report
