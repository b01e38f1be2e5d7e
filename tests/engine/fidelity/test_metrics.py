"""Every metric against values computed by hand on small tables, and against scipy where scipy has it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import spearmanr

from engine.fidelity.metrics import (
    accuracy,
    correlation_errors,
    correlation_rmse,
    distribution,
    jsd,
    spearman,
    tvd,
    wasserstein,
)

P = np.array([0.5, 0.5, 0.0])
Q = np.array([0.0, 0.5, 0.5])


def test_distribution_weighs_each_answer():
    assert distribution(np.array([0, 0, 2]), np.ones(3), 3).tolist() == pytest.approx([2 / 3, 0, 1 / 3])
    assert distribution(np.array([0, 0, 2]), np.array([1.0, 1.0, 2.0]), 3).tolist() == pytest.approx([0.5, 0, 0.5])


def test_tvd_is_half_the_l1_distance():
    assert tvd(P, Q) == pytest.approx(0.5)  # |.5-0| + |.5-.5| + |0-.5| = 1, halved
    assert tvd(P, P) == 0.0


def test_jsd_in_bits_by_hand():
    # M = (.25, .5, .25); KL(P||M) = .5 log2(.5/.25) + .5 log2(.5/.5) = .5 bit, the same for Q: JSD = .5
    assert jsd(P, Q) == pytest.approx(0.5)
    assert jsd(np.array([1.0, 0.0]), np.array([0.0, 1.0])) == pytest.approx(1.0)  # disjoint: the maximum, 1 bit


def test_wasserstein_moves_mass_along_the_scale():
    # half the mass moves from position 0 to 2: two steps x one half
    assert wasserstein(P, Q) == pytest.approx(1.0)
    assert wasserstein(np.array([1.0, 0, 0, 0]), np.array([0, 0, 0, 1.0])) == pytest.approx(3.0)


def test_accuracy_is_the_weighted_share_of_matches():
    real, sim = np.array([0, 1, 2, 2]), np.array([0, 1, 1, 2])
    assert accuracy(real, sim, np.ones(4)) == 0.75
    assert accuracy(real, sim, np.array([1.0, 1.0, 2.0, 0.0])) == 0.5


def test_spearman_agrees_with_scipy_unweighted_and_is_none_for_a_constant():
    rng = np.random.default_rng(3)
    real, sim = rng.integers(0, 5, 200), rng.integers(0, 5, 200)
    sim[:120] = real[:120]
    assert spearman(real, sim, np.ones(200)) == pytest.approx(spearmanr(real, sim).statistic)
    assert spearman(real, np.full(200, 2), np.ones(200)) is None


def test_weighted_spearman_ranks_with_the_weights_as_in_the_data_repeated_by_weight():
    # Repeated by weight: real 0 0 0 1 2 has mid-ranks 2 2 2 4 5, simulated 0 0 0 2 1 has 2 2 2 5 4; their Pearson
    # correlation is 0.875. Ranking the three respondents without their weights (1 2 3 against 1 3 2) gave 0.6875.
    real, sim, weights = np.array([0, 1, 2]), np.array([0, 2, 1]), np.array([3.0, 1.0, 1.0])
    assert spearman(real, sim, weights) == pytest.approx(0.875, abs=1e-12)
    assert spearman(real, sim, weights) == pytest.approx(spearmanr([0, 0, 0, 1, 2], [0, 0, 0, 2, 1]).statistic, abs=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_weighted_spearman_is_scipys_on_the_data_repeated_by_integer_weight(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 300))
    real = rng.integers(0, int(rng.integers(2, 8)), n)  # few options: many ties
    sim = np.where(rng.random(n) < 0.6, real, rng.integers(0, 5, n))
    weights = rng.integers(0, 6, n)  # a weight of 0 is a respondent left out
    expected = spearmanr(np.repeat(real, weights), np.repeat(sim, weights)).statistic
    assert spearman(real, sim, weights.astype(float)) == pytest.approx(expected, abs=1e-9)
    # survey weights are a scale: multiplying them all by a constant changes nothing
    assert spearman(real, sim, weights * 0.37) == pytest.approx(expected, abs=1e-9)


def test_weighted_spearman_is_none_where_only_unweighted_respondents_vary():
    assert spearman(np.array([0, 0, 1]), np.array([0, 1, 2]), np.array([1.0, 1.0, 0.0])) is None


def test_correlation_rmse_is_zero_for_the_same_answers_and_measures_a_flipped_pair():
    real = np.array([[0, 0], [1, 1], [2, 2], [3, 3]])
    assert correlation_rmse(real, real, np.ones(4)) == pytest.approx(0.0)
    flipped = real.copy()
    flipped[:, 1] = flipped[::-1, 1]  # real items correlate +1, simulated ones -1: one pair, off by 2
    assert correlation_rmse(real, flipped, np.ones(4)) == pytest.approx(2.0)
    assert not math.isnan(correlation_rmse(real, real, np.array([1.0, 2.0, 3.0, 4.0])))


def test_correlation_rmse_is_none_where_no_real_pair_correlates():
    constant = np.array([[0, 1], [1, 1], [2, 1], [3, 1]])  # the real second item does not vary: nothing to reproduce
    assert correlation_rmse(constant, np.array([[0, 0], [1, 1], [2, 2], [3, 3]]), np.ones(4)) is None
    assert len(correlation_errors(constant, constant, np.ones(4))) == 0


def three_items(rng: np.random.Generator, n: int) -> np.ndarray:
    """Three ordinal items (5 options) that correlate with one another."""
    a = rng.integers(0, 5, n)
    return np.column_stack([a, np.clip(a + rng.integers(-1, 2, n), 0, 4), np.clip(a + rng.integers(-2, 3, n), 0, 4)])


def test_a_collapsed_simulated_item_counts_as_no_association_not_as_a_perfect_fit():
    # The example: three ordinal items, n=200; the model answers item 3 the same for everyone. Its pairs used
    # to be dropped, leaving RMSE 0.0 ("perfect"); now each counts as a simulated correlation of 0.
    rng = np.random.default_rng(0)
    real = three_items(rng, 200)
    weights = np.ones(200)
    collapsed, at_random = real.copy(), real.copy()
    collapsed[:, 2] = 2
    at_random[:, 2] = rng.integers(0, 5, 200)
    r = [spearmanr(real[:, i], real[:, j]).statistic for i, j in ((0, 1), (0, 2), (1, 2))]
    assert correlation_errors(real, collapsed, weights) == pytest.approx([0.0, r[1], r[2]], abs=1e-12)
    assert correlation_rmse(real, collapsed, weights) == pytest.approx(np.sqrt((r[1] ** 2 + r[2] ** 2) / 3))
    random_rmse = correlation_rmse(real, at_random, weights)
    assert correlation_rmse(real, collapsed, weights) > 0.4 and random_rmse > 0.4
    assert correlation_rmse(real, collapsed, weights) == pytest.approx(random_rmse, abs=0.1)  # as bad as random
