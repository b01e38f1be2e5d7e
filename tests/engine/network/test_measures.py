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


def test_the_e_i_index_counts_edges_between_groups_less_those_inside():
    # 0 -> 1 inside a; 0 -> 2, 1 -> 2 and 2 -> 3 between a and b... 3 has no group: its edge is left out
    graph = Graph(np.array([0, 0, 1, 2]), np.array([1, 2, 2, 3]), layer="follow")
    measures = graph_measures(graph, groups={0: "a", 1: "a", 2: "b"})
    assert measures["ei_index"] == pytest.approx((2 - 1) / 3)
    assert graph_measures(graph)["ei_index"] is None
    assert graph_measures(graph, groups={0: "a", 1: "a", 2: "a"})["ei_index"] == -1.0
