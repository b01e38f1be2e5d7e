"""How far simulated answers are from real ones: distances between answer distributions, and agreement per person.

Pure functions of numpy arrays, sans I/O. An item's answers are *positions*: the 0-based place of
each answer among the item's labels, in scale order. Every function takes survey weights (ones for
an unweighted sample); scipy computes what it has (Jensen–Shannon, Wasserstein, ranks).

- :func:`tvd`: total variation distance, half the L1 distance of two distributions (0 to 1).
- :func:`jsd`: Jensen–Shannon divergence in bits (0 to 1), the square of scipy's distance.
- :func:`wasserstein`: earth mover's distance between two distributions over the scale, in scale steps.
- :func:`accuracy`: the weighted share of people whose simulated answer is their real one.
- :func:`spearman`: weighted Spearman correlation of real and simulated answers (the Pearson
  correlation of their average ranks); None where either does not vary.
- :func:`correlation_rmse`: across items, the root mean square difference of the real and the
  simulated Spearman correlation matrices, over each pair of items once.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import jensenshannon
from scipy.stats import rankdata, wasserstein_distance

__all__ = ["accuracy", "correlation_rmse", "distribution", "jsd", "spearman", "tvd", "wasserstein"]


def distribution(positions: np.ndarray, weights: np.ndarray, k: int) -> np.ndarray:
    """The weighted share of each of ``k`` positions (sums to 1)."""
    counts = np.bincount(positions, weights=weights, minlength=k)[:k]
    return counts / counts.sum()


def tvd(p: np.ndarray, q: np.ndarray) -> float:
    return float(0.5 * np.abs(p - q).sum())


def jsd(p: np.ndarray, q: np.ndarray) -> float:
    return float(jensenshannon(p, q, base=2) ** 2)


def wasserstein(p: np.ndarray, q: np.ndarray) -> float:
    scale = np.arange(len(p), dtype=float)
    return float(wasserstein_distance(scale, scale, p, q))


def accuracy(real: np.ndarray, simulated: np.ndarray, weights: np.ndarray) -> float:
    return float(np.sum(weights * (real == simulated)) / np.sum(weights))


def _weighted_pearson(x: np.ndarray, y: np.ndarray, weights: np.ndarray) -> float | None:
    if np.ptp(x) == 0 or np.ptp(y) == 0:  # a constant has no correlation
        return None
    w = weights / weights.sum()
    dx, dy = x - np.sum(w * x), y - np.sum(w * y)
    sx, sy = np.sum(w * dx * dx), np.sum(w * dy * dy)
    if sx <= 0 or sy <= 0:  # what varies has no weight
        return None
    return float(np.sum(w * dx * dy) / np.sqrt(sx * sy))


def spearman(real: np.ndarray, simulated: np.ndarray, weights: np.ndarray) -> float | None:
    return _weighted_pearson(rankdata(real), rankdata(simulated), weights)


def _correlations(columns: np.ndarray, weights: np.ndarray) -> list[float | None]:
    k = columns.shape[1]
    ranks = [rankdata(columns[:, i]) for i in range(k)]
    return [_weighted_pearson(ranks[i], ranks[j], weights) for i in range(k) for j in range(i + 1, k)]


def correlation_rmse(real: np.ndarray, simulated: np.ndarray, weights: np.ndarray) -> float | None:
    """``real`` and ``simulated``: one row per person, one column per item (at least 2); None where no pair of
    items has a correlation on both sides (an item that does not vary has none)."""
    pairs = [(a, b) for a, b in zip(_correlations(real, weights), _correlations(simulated, weights), strict=True)
             if a is not None and b is not None]
    if not pairs:
        return None
    return float(np.sqrt(np.mean([(a - b) ** 2 for a, b in pairs])))
