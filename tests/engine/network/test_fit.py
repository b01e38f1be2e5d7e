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
