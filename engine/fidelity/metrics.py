"""How far simulated answers are from real ones: distances between answer distributions, and agreement per person.

Pure functions of numpy arrays, sans I/O. An item's answers are *positions*: the 0-based place of
each answer among the item's labels, in scale order. Every function takes survey weights (ones for
an unweighted sample); scipy computes what it has (Jensen–Shannon, Wasserstein, ranks).

- :func:`tvd`: total variation distance, half the L1 distance of two distributions (0 to 1).
- :func:`jsd`: Jensen–Shannon divergence in bits (0 to 1), the square of scipy's distance.
- :func:`wasserstein`: earth mover's distance between two distributions over the scale, in scale steps.
- :func:`accuracy`: the weighted share of people whose simulated answer is their real one.
- :func:`spearman`: weighted Spearman correlation of real and simulated answers: the weighted Pearson
  correlation of their weighted mid-ranks (a respondent of weight 2 counts as two people, as
  ``scipy.stats.spearmanr`` on the data repeated by weight); None where either does not vary.
- :func:`correlation_errors`: across items, per pair of items with a real correlation, the real minus the
  simulated Spearman correlation; a simulated item that does not vary counts as no association (0).
- :func:`correlation_rmse`: their root mean square, over each such pair once.
- :func:`normalized_accuracy`: Park et al. (2024)'s normalized accuracy, each person's accuracy across
  items over their own test-retest accuracy on the same items, averaged over people.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import jensenshannon
from scipy.stats import wasserstein_distance

__all__ = ["accuracy", "correlation_errors", "correlation_rmse", "distribution", "jsd", "normalized_accuracy",
           "spearman", "tvd", "wasserstein"]


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
    weighed = weights > 0
    if not weighed.any() or np.ptp(x[weighed]) == 0 or np.ptp(y[weighed]) == 0:  # a constant has no correlation
        return None
    w = weights / weights.sum()
    dx, dy = x - np.sum(w * x), y - np.sum(w * y)
    sx, sy = np.sum(w * dx * dx), np.sum(w * dy * dy)
    return float(np.sum(w * dx * dy) / np.sqrt(sx * sy))


def _weighted_ranks(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Each value's weighted mid-rank: the weight below it, plus half the weight of its ties, plus 1/2.

    With integer weights, the average rank the value has in the data repeated by weight (each of its ``t`` tied
    copies above ``b`` others takes rank ``b + (t + 1) / 2``); with unit weights, ``scipy.stats.rankdata``'s.
    """
    levels, index = np.unique(values, return_inverse=True)
    tied = np.bincount(index.ravel(), weights=weights, minlength=len(levels))
    below = np.cumsum(tied) - tied
    return (below + tied / 2 + 0.5)[index.ravel()]


def spearman(real: np.ndarray, simulated: np.ndarray, weights: np.ndarray) -> float | None:
    return _weighted_pearson(_weighted_ranks(real, weights), _weighted_ranks(simulated, weights), weights)


def _correlations(columns: np.ndarray, weights: np.ndarray) -> list[float | None]:
    k = columns.shape[1]
    ranks = [_weighted_ranks(columns[:, i], weights) for i in range(k)]
    return [_weighted_pearson(ranks[i], ranks[j], weights) for i in range(k) for j in range(i + 1, k)]


def correlation_errors(real: np.ndarray, simulated: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Per pair of items (each once) with a real correlation, the real minus the simulated Spearman correlation.

    A pair whose real correlation does not exist (a real item that does not vary) is left out: there is nothing
    to reproduce. A pair whose simulated one does not exist (the simulated answers to an item do not vary, a
    collapsed item) counts as a simulated correlation of 0, no association, so its error is the real correlation:
    a model answering an item the same for everyone misses every association of that item, it is not perfect.

    Args:
        real: one row per person, one column per item (at least 2).
        simulated: the same shape, the simulated answers.
        weights: each person's survey weight.

    Returns:
        One error per pair used, in the order (0, 1), (0, 2), ..., (1, 2), ...; its length is the pairs used.
    """
    errors = [r - (s if s is not None else 0.0)
              for r, s in zip(_correlations(real, weights), _correlations(simulated, weights), strict=True)
              if r is not None]
    return np.array(errors, dtype=float)


def correlation_rmse(real: np.ndarray, simulated: np.ndarray, weights: np.ndarray) -> float | None:
    """The root mean square of :func:`correlation_errors`; None where no pair of items has a real correlation."""
    errors = correlation_errors(real, simulated, weights)
    return float(np.sqrt(np.mean(errors**2))) if len(errors) else None


def normalized_accuracy(real: np.ndarray, simulated: np.ndarray, retest: np.ndarray, asked: np.ndarray,
                        weights: np.ndarray) -> float | None:
    """Park et al. (2024)'s normalized accuracy: per person, the share of items the simulated answer gets right over
    the share the person's own retest answer does, on the same items; the weighted mean of that ratio over people.

    A person whose retest agrees with them on none of their items has no ratio (its ceiling is 0) and is left out,
    as is one asked no item. With few items that leaves out many: the measure is meant for many items per person.

    Args:
        real: one row per person, one column per item: the real answers (positions).
        simulated: the simulated answers, the same shape.
        retest: the person's answers when asked the same items again, the same shape.
        asked: where a person has all three answers to an item (only those cells count).
        weights: each person's survey weight.

    Returns:
        The mean ratio (1: as good as the person's own consistency; it may pass 1), or None where nobody has one.
    """
    hits = ((real == simulated) & asked).sum(axis=1)
    ceiling = ((real == retest) & asked).sum(axis=1)  # over the same items, so the shares' common divisor cancels
    counted = (ceiling > 0) & (weights > 0)
    if not counted.any():
        return None
    return float(np.average(hits[counted] / ceiling[counted], weights=weights[counted]))
