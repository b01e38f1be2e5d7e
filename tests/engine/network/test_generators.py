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
    pair_ends,
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


class CountingRng:
    """A numpy Generator that counts the values it draws and refuses to draw past ``budget``: the work of a generator
    is its draws (each followed by numpy passes over them), so a bound on the draws bounds the work, whatever the
    machine's speed."""

    def __init__(self, seed: int, budget: int) -> None:
        self._rng = np.random.default_rng(seed)
        self.budget = budget
        self.drawn = 0

    def __getattr__(self, name: str):
        method = getattr(self._rng, name)

        def counted(*args, **kwargs):
            result = method(*args, **kwargs)
            self.drawn += int(np.size(result)) if result is not None else int(np.size(args[0]))
            if self.drawn > self.budget:
                raise AssertionError(f"{self.drawn:,} values drawn, past the budget of {self.budget:,}")
            return result

        return counted


@pytest.mark.parametrize(("n", "p"), [(3_000, 1.0), (3_000, 0.999), (3_000, 0.5), (300_000, 1e-5)])
def test_erdos_renyi_draws_a_few_values_per_edge_at_any_p_near_one_included(n: int, p: float):
    # Issue 50: near p = 1 the old rejection sampling drew pairs for hours, hunting the last few missing ones.
    pairs = n * (n - 1) // 2
    rng = CountingRng(8, budget=3 * int(p * pairs) + 10_000)  # a few values per edge: linear, whatever p is
    low, high = erdos_renyi(n, p, rng)  # type: ignore[arg-type]
    assert abs(len(low) - p * pairs) <= 6 * np.sqrt(pairs * p * (1 - p)) + 1
    assert (low < high).all() and (high < n).all()
    keys = low * n + high
    assert (np.diff(keys) > 0).all()  # sorted by (low, high), each pair once
    if p == 1.0:
        assert len(low) == pairs


def test_pair_numbers_map_to_every_pair_in_order_and_back():
    for n in (2, 3, 4, 9, 57):
        low, high = pair_ends(np.arange(n * (n - 1) // 2), n)
        assert list(zip(low.tolist(), high.tolist(), strict=True)) == [(i, j) for i in range(n) for j in range(i + 1, n)]
    n = 10**8  # pair numbers near 5e15, where the square root is taken in floating point
    pairs = n * (n - 1) // 2
    index = np.concatenate([[0, 1, n - 2, n - 1, pairs - 3, pairs - 2, pairs - 1],
                            np.random.default_rng(1).integers(0, pairs, 200_000)])
    low, high = pair_ends(index, n)
    assert ((low < high) & (high < n)).all()
    assert (low * n - low * (low + 1) // 2 + (high - low - 1) == index).all()  # the pair's number, counted back


@pytest.mark.parametrize("p", [0.3, 0.97])
def test_erdos_renyi_links_each_pair_independently_with_probability_p(p: float):
    # 20,000 seeded graphs on 8 nodes (28 pairs): the edge count is Binomial(28, p), each pair is an edge in a share p
    # of the graphs, and each two pairs in a share p^2. Seeded, so the p-values are fixed; a wrong mapping from pair
    # numbers, a geometric off by one or a dependence between pairs drives them to 0.
    from scipy import stats

    n, graphs = 8, 20_000
    pairs = n * (n - 1) // 2
    rng = np.random.default_rng(12)
    present = np.zeros((graphs, pairs), dtype=bool)
    for g in range(graphs):
        low, high = erdos_renyi(n, p, rng)
        present[g, low * n - low * (low + 1) // 2 + (high - low - 1)] = True
    counts = np.bincount(present.sum(axis=1), minlength=pairs + 1)
    expected = stats.binom.pmf(np.arange(pairs + 1), pairs, p) * graphs
    keep = expected >= 5  # the chi-square test's rule of thumb: the rare counts pooled into one cell
    observed = np.append(counts[keep], counts[~keep].sum())
    wanted = np.append(expected[keep], expected[~keep].sum())
    assert stats.chisquare(observed, wanted * observed.sum() / wanted.sum()).pvalue > 1e-3
    per_pair = present.sum(axis=0)
    assert stats.chisquare(per_pair).pvalue > 1e-3 and abs(per_pair.mean() / graphs - p) < 0.005
    both = (present.T.astype(float) @ present) / graphs
    off = both[~np.eye(pairs, dtype=bool)]
    assert np.abs(off - p * p).max() < 5 * np.sqrt(p * p * (1 - p * p) / graphs)
    same = [erdos_renyi(n, p, np.random.default_rng(3)) for _ in range(2)]
    assert all((a == b).all() for a, b in zip(*same, strict=True))  # seeded


def test_a_block_model_whose_groups_are_nearly_complete_is_made_in_draws_linear_in_its_edges():
    groups = np.repeat([0, 1], 1_500)
    within, between = block_probabilities(groups, 1_400, 0.99)
    assert within > 0.9  # each group nearly complete
    rng = CountingRng(9, budget=3 * 1_400 * 3_000 // 2)
    low, high = block_model(groups, within, between, rng)  # type: ignore[arg-type]
    assert simple((low, high)) and len(low) == pytest.approx(1_400 * 3_000 / 2, rel=0.01)
