"""The fit report: each measure's target from the model, the achieved figure from the graph, both right on graphs
whose answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from engine.network.fit import fit_rows
from engine.network.generators import barabasi_albert, erdos_renyi, watts_strogatz
from engine.network.spec import BarabasiAlbert, BlockModel, Configuration, ErdosRenyi, WattsStrogatz


def by_measure(rows):
    return {row.measure: row for row in rows}


def test_a_triangle_and_a_lone_edge_have_the_measures_counted_by_hand():
    # 0-1-2 a triangle, 3-4 an edge, 5 alone: clustering 1, 1, 1, 0, 0, 0; three components, the largest 3 of 6
    low, high = np.array([0, 0, 1, 3]), np.array([1, 2, 2, 4])
    fit = by_measure(fit_rows(Configuration(degrees=[2, 2, 2, 1, 1, 1]), 6, low, high, asked=np.array([2, 2, 2, 1, 1, 1])))
    assert (fit["edges"].target, fit["edges"].achieved) == (4.0, 4.0)
    assert fit["clustering"].achieved == pytest.approx(0.5) and fit["clustering"].note == "exact"
    assert (fit["components"].achieved, fit["largest_component_share"].achieved) == (3.0, 0.5)
    assert fit["ends_kept"].achieved == pytest.approx(8 / 9) and fit["degree_max"].achieved == 2.0


def test_generated_graphs_fit_their_models_targets():
    rng = np.random.default_rng(7)
    n = 4_000
    er = by_measure(fit_rows(ErdosRenyi(p=0.003), n, *erdos_renyi(n, 0.003, rng)))
    assert er["mean_degree"].achieved == pytest.approx(er["mean_degree"].target, rel=0.05)
    assert er["degree_p50"].achieved == er["degree_p50"].target and er["degree_ks"].achieved < 0.05
    assert er["clustering"].achieved == pytest.approx(0.003, abs=0.003)
    ws = by_measure(fit_rows(WattsStrogatz(k=10, p=0.0), n, *watts_strogatz(n, 10, 0.0, rng)))
    assert ws["clustering"].achieved == pytest.approx(ws["clustering"].target) == pytest.approx(2 / 3)  # a ring lattice: 3(k-2)/(4(k-1))
    ba = by_measure(fit_rows(BarabasiAlbert(m=4), n, *barabasi_albert(n, 4, rng)))
    assert (ba["components"].achieved, ba["degree_p10"].target, ba["degree_p10"].achieved) == (1.0, 4.0, 4.0)
    assert ba["degree_ks"].achieved < 0.05 and ba["degree_p99"].achieved == pytest.approx(ba["degree_p99"].target, rel=0.25)


def test_a_block_models_homophily_is_coleman_index_of_its_groups():
    groups = np.array([0, 0, 0, 1, 1, 1])
    # pairs inside groups: 6 of 15 (s0 = 0.4); edges: 3 inside, 1 across (s = 0.75): (0.75 - 0.4) / 0.6
    low, high = np.array([0, 1, 3, 2]), np.array([1, 2, 4, 3])
    fit = by_measure(fit_rows(BlockModel(attribute="party", mean_degree=1, homophily=0.5), 6, low, high, groups=groups))
    assert fit["homophily"].target == 0.5 and fit["homophily"].achieved == pytest.approx(0.35 / 0.6)


def _networkx_clustering(n: int, low: np.ndarray, high: np.ndarray) -> float:
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from(range(n))
    graph.add_edges_from(zip(low.tolist(), high.tolist(), strict=True))
    return float(nx.average_clustering(graph))


def test_clustering_counts_every_wedge_of_a_sparse_graph_as_networkx_does():
    n = 1_500
    low, high = watts_strogatz(n, 8, 0.3, np.random.default_rng(4))
    fit = by_measure(fit_rows(WattsStrogatz(k=8, p=0.3), n, low, high))
    assert fit["clustering"].note == "exact"
    assert fit["clustering"].achieved == pytest.approx(_networkx_clustering(n, low, high), abs=1e-12)


def test_clustering_of_a_dense_graph_samples_each_nodes_wedges_and_lands_near_networkx():
    # Issue 50: counting every triangle of a near-complete graph is sum(degree^2) per node, minutes at 3,000 nodes;
    # past WEDGES_PER_NODE pairs of neighbours a node's coefficient comes from a seeded sample of them.
    n = 400
    low, high = erdos_renyi(n, 0.6, np.random.default_rng(5))
    fit = by_measure(fit_rows(ErdosRenyi(p=0.6), n, low, high, seed=3))
    assert "seeded sample of that many" in fit["clustering"].note
    assert fit["clustering"].achieved == pytest.approx(_networkx_clustering(n, low, high), abs=0.005)
    again = by_measure(fit_rows(ErdosRenyi(p=0.6), n, low, high, seed=3))
    assert again["clustering"].achieved == fit["clustering"].achieved  # seeded
