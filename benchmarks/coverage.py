"""Do the fidelity intervals cover? A simulation study of every interval :func:`engine.fidelity.scoring.score` and
:func:`~engine.fidelity.scoring.compare_variant` report.

For each sample size ``n`` and each of two truths, ``--reps`` surveys are drawn from a known model, scored as Polis
scores a run (``score``, ``--bootstrap`` resamples, unit weights), and the share of nominal 95% intervals that
contain the model's true value is printed, with the mean estimate beside the truth (its bias).

The model: three ordinal items of five options, each respondent's real answers drawn from a latent normal vector
(pairwise correlation ``rho_real``) cut at the quantiles of ``P``; the simulated answers:
    truth 0      drawn the same way, independently of the real ones (same distribution, same correlations):
                 TVD, JSD, Wasserstein, Spearman, ``correlation_rmse`` and ``variant_tvd`` are 0, accuracy is
                 sum(P_k^2);
    truth not 0  each respondent's real answer kept with probability ``KEEP``, else drawn from ``Q`` with latent
                 correlation ``rho_sim``: the distances are those of ``KEEP P + (1 - KEEP) Q`` from ``P``.
The truths with a closed form are computed from it; Spearman's and ``correlation_rmse``'s from one sample of
:data:`TRUTH_N` respondents. ``item_normalized_accuracy`` (a codebook ceiling of 0.8) is accuracy / 0.8, so it covers as
accuracy does. The wording check's ``variant_tvd`` compares the simulated answers with those of a variant drawn
like them (truth 0) or from ``Q`` (not 0: the simulated answers' mixture against ``Q``).

Not here: survey weights (raked weights are resampled without re-raking), Park et al.'s retest-based
``normalized_accuracy``, and the tier comparison's seed-noise interval (``benchmarks/coverage_tiers.py``).

Measured at commit f1b47e3 (200 surveys a row, 200 resamples each; 1,036 s on 2 cores shared with a CI run), the
share of nominal 95% intervals that contain the truth (a row's standard error is about 0.015):
    figure                    truth 0: n=50   300    2000   not 0: n=50   300    2000
    tvd                                0.955  0.935  0.940          0.947  0.928  0.933
    jsd                                0.958  0.972  0.962          0.967  0.943  0.932
    wasserstein                        0.930  0.953  0.933          0.942  0.907  0.932
    accuracy                           0.910  0.943  0.953          0.920  0.953  0.950
    item_normalized_accuracy           0.910  0.943  0.953          0.920  0.953  0.950
    spearman                           0.922  0.942  0.950          0.922  0.945  0.932
    correlation_rmse                   0.965  0.935  0.955          0.900  0.915  0.940
    variant_tvd                        0.960  0.915  0.930          0.890  0.900  0.920
Before f1b47e3 (the plain percentile interval), every distance's interval contained a truth of 0 in none of the
surveys at any n (0.000). Under 0.93: at n = 300 with the truth not 0, TVD 0.928, Wasserstein 0.907,
``correlation_rmse`` 0.915 and ``variant_tvd`` 0.900; ``variant_tvd`` at 300 with the truth 0 (0.915) and at 2,000
not 0 (0.920); at n = 50, accuracy, Spearman, ``correlation_rmse`` and ``variant_tvd`` (docs/methods.md says so).

Usage: python benchmarks/coverage.py [--reps 200] [--bootstrap 200] [--n 50 300 2000] [--quick]
"""

from __future__ import annotations

import argparse
import time
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from scipy import stats

from engine.fidelity.metrics import correlation_rmse, jsd, spearman, tvd, wasserstein
from engine.fidelity.scoring import Figure, ItemAnswers, compare_variant, score

#: The real answers' distribution over five ordered options, and the one the simulated answers drift to.
P = np.array([0.10, 0.20, 0.40, 0.20, 0.10])
Q = np.array([0.25, 0.30, 0.25, 0.15, 0.05])
KEEP = 0.6  #: the share of real answers the "truth not 0" model keeps
RHO_REAL, RHO_SIM = 0.5, 0.2  #: the latent correlations between items
ITEMS = 3
CEILING = 0.8  #: the codebook's retest ceiling, for normalized accuracy
TRUTH_N = 1_000_000  #: respondents in the sample the Spearman truths are computed from
LABELS = tuple(f"o{k}" for k in range(len(P)))


def _answers(n: int, shares: np.ndarray, rho: float, rng: np.random.Generator) -> np.ndarray:
    """``n`` respondents' answers to every item (n x ITEMS positions): a latent normal vector with pairwise
    correlation ``rho``, each coordinate cut at the quantiles of ``shares``."""
    cov = np.full((ITEMS, ITEMS), rho) + (1 - rho) * np.eye(ITEMS)
    latent = rng.multivariate_normal(np.zeros(ITEMS), cov, size=n)
    cuts = stats.norm.ppf(np.cumsum(shares)[:-1])
    return np.searchsorted(cuts, latent)


def _simulated(real: np.ndarray, truth_zero: bool, rng: np.random.Generator) -> np.ndarray:
    if truth_zero:
        return _answers(len(real), P, RHO_REAL, rng)
    drifted = _answers(len(real), Q, RHO_SIM, rng)
    return np.where(rng.random(real.shape) < KEEP, real, drifted)


def _truths(truth_zero: bool, rng: np.random.Generator) -> dict[str, float]:
    """Each figure's true value under the model (the per-item figures are the same for every item)."""
    if truth_zero:
        accuracy = float((P**2).sum())
        return {"tvd": 0.0, "jsd": 0.0, "wasserstein": 0.0, "accuracy": accuracy, "item_normalized_accuracy": accuracy / CEILING,
                "spearman": 0.0, "correlation_rmse": 0.0, "variant_tvd": 0.0}
    mixed = KEEP * P + (1 - KEEP) * Q
    real = _answers(TRUTH_N, P, RHO_REAL, rng)
    simulated = _simulated(real, False, rng)
    ones = np.ones(TRUTH_N)
    accuracy = KEEP + (1 - KEEP) * float((P * Q).sum())
    return {"tvd": tvd(P, mixed), "jsd": jsd(P, mixed), "wasserstein": wasserstein(P, mixed), "accuracy": accuracy,
            "item_normalized_accuracy": accuracy / CEILING, "spearman": float(spearman(real[:, 0], simulated[:, 0], ones) or 0.0),
            "correlation_rmse": float(correlation_rmse(real, simulated, ones) or 0.0), "variant_tvd": tvd(mixed, Q)}


def _one_survey(n: int, truth_zero: bool, bootstrap: int, seed: int) -> list[Figure]:
    rng = np.random.default_rng(seed)
    real = _answers(n, P, RHO_REAL, rng)
    simulated = _simulated(real, truth_zero, rng)
    agents, weights = np.arange(n), np.ones(n)
    items = [ItemAnswers(f"q{i}", LABELS, True, agents, real[:, i], simulated[:, i], weights, ceiling=CEILING)
             for i in range(ITEMS)]
    figures = [f for f in score(items, bootstrap=bootstrap, seed=seed) if f.group_by is None]
    variant = _answers(n, P, RHO_REAL, rng)[:, 0] if truth_zero else rng.choice(len(Q), n, p=Q)
    varied = ItemAnswers("q0", LABELS, True, agents, real[:, 0], variant, weights)
    figures += [f for f in compare_variant(items[0], varied, "v", threshold=0.1, bootstrap=bootstrap, seed=seed)
                if f.metric == "variant_tvd"]
    return figures


def study(sizes: Sequence[int], reps: int, bootstrap: int) -> None:
    print(f"{'n':>5} {'truth':>6} {'figure':<20} {'true':>7} {'mean est':>9} {'covered':>8}")
    for truth_zero in (True, False):
        truths = _truths(truth_zero, np.random.default_rng(7))
        for n in sizes:
            covered: dict[str, list[bool]] = defaultdict(list)
            estimates: dict[str, list[float]] = defaultdict(list)
            for rep in range(reps):
                for figure in _one_survey(n, truth_zero, bootstrap, seed=10_000 * n + rep + (0 if truth_zero else 1) * 7919):
                    if figure.metric not in truths or figure.value is None:
                        continue
                    truth = truths[figure.metric]
                    estimates[figure.metric].append(figure.value)
                    inside = figure.ci_low is not None and figure.ci_high is not None and figure.ci_low <= truth <= figure.ci_high
                    covered[figure.metric].append(inside)
            for metric in truths:
                if metric in covered:
                    print(f"{n:>5} {'0' if truth_zero else 'not 0':>6} {metric:<20} {truths[metric]:>7.4f} "
                          f"{np.mean(estimates[metric]):>9.4f} {np.mean(covered[metric]):>8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=200, help="surveys drawn per n and truth")
    parser.add_argument("--bootstrap", type=int, default=200, help="bootstrap resamples per figure")
    parser.add_argument("--n", type=int, nargs="+", default=[50, 300, 2000], help="respondents per survey")
    parser.add_argument("--quick", action="store_true", help="30 reps of n = 50 and 300 (a smoke run)")
    args = parser.parse_args()
    if args.quick:
        args.reps, args.n = 30, [50, 300]
    started = time.perf_counter()
    print(f"coverage of nominal 95% intervals: {args.reps} surveys per row, {args.bootstrap} resamples each; "
          f"{ITEMS} ordinal items of {len(P)} options, unit weights")
    study(args.n, args.reps, args.bootstrap)
    print(f"{time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
