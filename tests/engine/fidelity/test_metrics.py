"""Every metric against values computed by hand on small tables, and against scipy where scipy has it."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import spearmanr

from engine.fidelity.metrics import accuracy, correlation_rmse, distribution, jsd, spearman, tvd, wasserstein

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


def test_weighted_spearman_counts_a_weight_of_two_as_two_people():
    real, sim = np.array([0, 1, 2, 3]), np.array([1, 0, 2, 3])
    doubled = spearman(np.array([0, 1, 2, 3, 3]), np.array([1, 0, 2, 3, 3]), np.ones(5))
    # ranks are taken over the respondents as they are; weights enter the correlation of those ranks
    assert spearman(real, sim, np.ones(4)) == pytest.approx(spearmanr(real, sim).statistic)
    assert spearman(real, sim, np.array([1.0, 1.0, 1.0, 2.0])) == pytest.approx(
        np.corrcoef(*[np.repeat(v, [1, 1, 1, 2]) for v in (np.array([1, 2, 3, 4.0]), np.array([2, 1, 3, 4.0]))])[0, 1])
    assert doubled is not None


def test_correlation_rmse_is_zero_for_the_same_answers_and_measures_a_flipped_pair():
    real = np.array([[0, 0], [1, 1], [2, 2], [3, 3]])
    assert correlation_rmse(real, real, np.ones(4)) == pytest.approx(0.0)
    flipped = real.copy()
    flipped[:, 1] = flipped[::-1, 1]  # real items correlate +1, simulated ones -1: one pair, off by 2
    assert correlation_rmse(real, flipped, np.ones(4)) == pytest.approx(2.0)
    assert correlation_rmse(real, np.zeros((4, 2), dtype=int), np.ones(4)) is None
    assert not math.isnan(correlation_rmse(real, real, np.array([1.0, 2.0, 3.0, 4.0])))
