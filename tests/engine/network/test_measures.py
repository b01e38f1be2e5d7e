"""A follow graph's per-tick measures, counted by hand on small graphs."""

from __future__ import annotations

import numpy as np
import pytest

from engine.network.graph import Graph
from engine.network.measures import graph_measures


def test_a_triangle_with_a_one_way_tail_has_the_measures_counted_by_hand():
    # 0 <-> 1 <-> 2 <-> 0 (mutual), 3 -> 0: 7 edges, 6 reciprocated; clustering 1/3 at 0 (neighbours 1, 2, 3), 1, 1, 0
    pairs = [(0, 1), (1, 0), (1, 2), (2, 1), (2, 0), (0, 2), (3, 0)]
    graph = Graph(np.array([a for a, _ in pairs]), np.array([b for _, b in pairs]), layer="follow")
    measures = graph_measures(graph)
    assert measures["edges"] == 7 and measures["mean_degree"] == 7 / 4
    assert (measures["in_degree_max"], measures["out_degree_max"]) == (3, 2)
    assert measures["reciprocity"] == pytest.approx(6 / 7)
    assert measures["clustering"] == pytest.approx((1 / 3 + 1 + 1 + 0) / 4)
    graph.remove_edge(3, 0)
    graph.add_edge(3, 1)
    graph.add_edge(1, 3)  # the changes count: 3 <-> 1 now mutual
    after = graph_measures(graph)
    assert (after["edges"], after["reciprocity"]) == (8, 1.0)
