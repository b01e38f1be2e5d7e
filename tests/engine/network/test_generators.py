"""The numpy generators: no self-loop or repeated edge, seeded, and the degrees theory gives."""

from __future__ import annotations

import numpy as np
import pytest

from engine.network.generators import (
    barabasi_albert,
    block_model,
    block_probabilities,
    configuration,
    erdos_renyi,
    group_codes,
    undirected_unique,
    watts_strogatz,
)


def degrees(n: int, edges: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
    return np.bincount(np.concatenate(edges), minlength=n)


def simple(edges: tuple[np.ndarray, np.ndarray]) -> bool:
    low, high = edges
    return bool((low < high).all()) and len(set(zip(low.tolist(), high.tolist(), strict=True))) == len(low)


def test_undirected_unique_keeps_each_pair_once_and_drops_self_loops():
    low, high = undirected_unique(np.array([3, 1, 2, 5, 4]), np.array([1, 3, 2, 4, 5]))
    assert (low.tolist(), high.tolist()) == ([1, 4], [3, 5])


def test_barabasi_albert_has_the_degree_distribution_of_preferential_attachment():
    n, m = 20_000, 3
    edges = barabasi_albert(n, m, np.random.default_rng(2))
    assert simple(edges) and m * (n - m - 1) * 0.99 <= len(edges[0]) <= m * (n - m - 1) + m
    found = degrees(n, edges)
    # P(k) = 2m(m+1) / (k(k+1)(k+2)) for k >= m (Barabasi and Albert; Dorogovtsev et al.): 0.4 at k = m, 0.2 at m + 1
    assert (found == m).mean() == pytest.approx(0.4, abs=0.02) and (found == m + 1).mean() == pytest.approx(0.2, abs=0.02)
    assert found.max() > 20 * m  # hubs
    again = barabasi_albert(n, m, np.random.default_rng(2))
    assert all((a == b).all() for a, b in zip(edges, again, strict=True))  # seeded


def test_erdos_renyi_draws_the_binomial_number_of_distinct_pairs():
    n, p = 2_000, 0.01
    edges = erdos_renyi(n, p, np.random.default_rng(3))
    expected = p * n * (n - 1) / 2
    assert simple(edges) and abs(len(edges[0]) - expected) < 4 * np.sqrt(expected)
    assert len(erdos_renyi(n, 0.0, np.random.default_rng(3))[0]) == 0
    assert len(erdos_renyi(30, 1.0, np.random.default_rng(3))[0]) == 30 * 29 // 2


def test_watts_strogatz_is_a_ring_lattice_until_rewired():
    n, k = 1_000, 6
    ring = watts_strogatz(n, k, 0.0, np.random.default_rng(4))
    assert simple(ring) and (degrees(n, ring) == k).all()
    rewired = watts_strogatz(n, k, 0.2, np.random.default_rng(4))
    assert simple(rewired) and abs(len(rewired[0]) - n * k / 2) < 0.01 * n * k
    assert not (degrees(n, rewired) == k).all()


def test_the_configuration_model_keeps_the_degrees_asked_but_for_dropped_repeats():
    rng = np.random.default_rng(5)
    asked = rng.choice([1, 2, 5, 20], size=5_000, p=[0.4, 0.3, 0.2, 0.1])
    edges = configuration(asked, rng)
    found = degrees(5_000, edges)
    assert simple(edges) and (found <= asked).all()  # never more than asked
    assert (found == asked).mean() > 0.97 and 2 * len(edges[0]) >= 0.99 * (asked.sum() - 1)


def test_a_block_model_puts_the_homophilous_share_of_edges_inside_groups():
    rng = np.random.default_rng(6)
    groups = group_codes(rng.choice(["left", "right", "centre", None], size=6_000, p=[0.4, 0.3, 0.2, 0.1]).tolist())
    assert groups.max() == 3
    sizes = np.bincount(groups)
    s0 = (sizes * (sizes - 1)).sum() / (6_000 * 5_999)  # the share of pairs inside groups
    for homophily in (0.0, 0.5, 1.0):
        within, between = block_probabilities(groups, 10, homophily)
        low, high = block_model(groups, within, between, rng)
        inside = (groups[low] == groups[high]).mean()
        assert simple((low, high)) and len(low) == pytest.approx(30_000, rel=0.03)
        assert inside == pytest.approx(s0 + homophily * (1 - s0), abs=0.02)
    assert block_probabilities(group_codes(["a", "b"] * 5), 9, 1.0)[0] > 1  # 10 agents cannot each have 9 inside groups of 5
