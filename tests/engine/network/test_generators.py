"""The numpy generators: no self-loop or repeated edge, seeded, and the degrees theory gives."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from engine.network.generators import (
    barabasi_albert,
    block_model,
    block_probabilities,
    configuration,
    directed_unique,
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
    assert simple(rewired) and len(rewired[0]) == n * k // 2
    assert not (degrees(n, rewired) == k).all()


@pytest.mark.parametrize(("n", "k", "p"), [(50, 4, 0.5), (200, 10, 1.0), (7, 4, 1.0), (5, 4, 1.0)])
def test_watts_strogatz_redraws_a_rewiring_onto_an_edge_or_its_node_so_it_keeps_n_k_over_2_edges(n: int, k: int, p: float):
    # Issue 51, item 12: a rewiring that landed on an edge there was, or on its own node, was dropped: n = 50, k = 4,
    # p = 0.5 kept 96.7 of its 100 edges on average (91 at the fewest), n = 200, k = 10, p = 1 972 of 1,000. A complete
    # graph (n = 5, k = 4) has nowhere to rewire to: it stays complete.
    for seed in range(50):
        edges = watts_strogatz(n, k, p, np.random.default_rng(seed))
        assert simple(edges) and len(edges[0]) == n * k // 2, seed


@pytest.mark.parametrize(("n", "k", "p"), [(50, 4, 0.5), (300, 6, 0.2), (200, 10, 1.0)])
def test_watts_strogatz_mean_clustering_is_networkx_watts_strogatz_graphs(n: int, k: int, p: float):
    # Both means over 200 seeds; their standard errors are at most 0.003 (n = 50), so 0.01 is over two of the difference's.
    ours, theirs = [], []
    for seed in range(200):
        graph = nx.Graph()
        graph.add_nodes_from(range(n))
        graph.add_edges_from(zip(*(side.tolist() for side in watts_strogatz(n, k, p, np.random.default_rng(seed))), strict=True))
        ours.append(nx.average_clustering(graph))
        theirs.append(nx.average_clustering(nx.watts_strogatz_graph(n, k, p, seed=seed)))
    assert np.mean(ours) == pytest.approx(np.mean(theirs), abs=0.01)


def test_watts_strogatz_at_a_million_nodes_rewires_in_a_few_rounds_of_redraws(monkeypatch):
    # The redraws are rounds over all the colliding rewirings at once; a sparse ring needs a handful, never the bound.
    from engine.network import generators

    monkeypatch.setattr(generators, "REWIRE_ROUNDS", 5)
    n, k = 1_000_000, 4
    edges = watts_strogatz(n, k, 0.5, np.random.default_rng(0))
    assert len(edges[0]) == n * k // 2 and len(undirected_unique(*edges)[0]) == n * k // 2


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


def digraph(n: int, edges: tuple[np.ndarray, np.ndarray]) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(zip(edges[0].tolist(), edges[1].tolist(), strict=True))
    return graph


def directed_simple(edges: tuple[np.ndarray, np.ndarray]) -> bool:
    source, target = edges
    return bool((source != target).all()) and len(set(zip(source.tolist(), target.tolist(), strict=True))) == len(source)


@pytest.mark.parametrize("p", [0.02, 0.1, 0.5])
def test_a_directed_erdos_renyi_draws_each_ordered_pair_so_its_reciprocity_is_p(p: float):
    # Issue 51, item 12: a directed generated layer held each edge both ways, reciprocity 1.
    n = 600
    edges = erdos_renyi(n, p, np.random.default_rng(8), directed=True)
    expected = p * n * (n - 1)
    assert directed_simple(edges) and abs(len(edges[0]) - expected) < 4 * np.sqrt(expected)
    assert nx.reciprocity(digraph(n, edges)) == pytest.approx(p, abs=4 * np.sqrt(p * (1 - p) / expected) + 0.002)
    assert len(erdos_renyi(30, 1.0, np.random.default_rng(3), directed=True)[0]) == 30 * 29  # every ordered pair
    again = erdos_renyi(n, p, np.random.default_rng(8), directed=True)
    assert all((a == b).all() for a, b in zip(edges, again, strict=True))  # seeded


def test_a_directed_barabasi_albert_is_prices_model_attaching_by_in_degree_plus_one():
    n, m = 20_000, 3
    edges = barabasi_albert(n, m, np.random.default_rng(2), directed=True)
    source, target = edges
    assert directed_simple(edges) and (source > target).all()  # a new node links older ones: nothing comes back
    graph = digraph(n, edges)
    assert nx.reciprocity(graph) == 0.0
    assert max(d for _, d in graph.out_degree()) == m and m * (n - m - 1) * 0.98 <= len(source) <= m * (n - m - 1) + m
    found = np.bincount(target, minlength=n)
    # Price's in-degrees with attractiveness 1: P(j) = B(j + 1, 2 + 1/m) / B(1, 1 + 1/m): 4/7 at 0, 6/35 at 1, a tail of
    # exponent 2 + 1/m (heavy: hubs far past the out-degree m).
    assert (found == 0).mean() == pytest.approx(4 / 7, abs=0.015) and (found == 1).mean() == pytest.approx(6 / 35, abs=0.015)
    assert found.max() > 100 * m and (found >= 10 * m).mean() > 0.005
    again = barabasi_albert(n, m, np.random.default_rng(2), directed=True)
    assert all((a == b).all() for a, b in zip(edges, again, strict=True))  # seeded


def test_a_directed_ring_or_configuration_model_orients_each_edge_of_the_undirected_one_at_random():
    n = 2_000
    for make in (lambda rng, directed: watts_strogatz(n, 6, 0.3, rng, directed=directed),
                 lambda rng, directed: configuration(np.full(n, 4), rng, directed=directed)):
        arcs = make(np.random.default_rng(9), True)
        undirected = make(np.random.default_rng(9), False)
        assert directed_simple(arcs) and nx.reciprocity(digraph(n, arcs)) == 0.0
        assert all((a == b).all() for a, b in zip(undirected_unique(*arcs), undirected, strict=True))  # the same pairs
        assert (arcs[0] < arcs[1]).mean() == pytest.approx(0.5, abs=0.03)


def test_a_directed_block_model_draws_each_ordered_pair_with_its_groups_probability():
    groups = np.repeat([0, 1], [800, 200])
    within, between = block_probabilities(groups, 10.0, 0.6)
    edges = block_model(groups, within, between, np.random.default_rng(4), directed=True)
    assert directed_simple(edges)
    inside = (800 * 799 + 200 * 199) / 2
    outside = 1000 * 999 / 2 - inside
    expected = (within**2 * inside + between**2 * outside) / (within * inside + between * outside)
    assert nx.reciprocity(digraph(1000, edges)) == pytest.approx(expected, abs=0.015)
    assert len(edges[0]) == pytest.approx(2 * (within * inside + between * outside), rel=0.03)  # out-degree 10 each


def test_directed_unique_keeps_each_ordered_pair_once():
    source, target = directed_unique(np.array([3, 1, 1, 5, 3, 2]), np.array([1, 3, 3, 4, 1, 2]))
    assert (source.tolist(), target.tolist()) == ([1, 3, 5], [3, 1, 4])
