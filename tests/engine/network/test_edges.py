"""A generated layer's edges as a run takes them: undirected once, directed as its generator draws them, or mutual."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from pydantic import ValidationError

from engine.network.edges import layer_edges
from engine.network.spec import BarabasiAlbert, ErdosRenyi, LayerSpec

IDS = np.arange(100, 1_100)  # agent ids, not node indexes


def reciprocity(edges) -> float:
    graph = nx.DiGraph()
    graph.add_edges_from(zip(edges.source.tolist(), edges.target.tolist(), strict=True))
    return nx.reciprocity(graph)


def test_a_directed_erdos_renyi_layer_has_reciprocity_p_and_its_seed_reproduces_it():
    # Issue 51, item 12: a directed generated layer held each edge both ways (reciprocity 1).
    layer = LayerSpec(generate=ErdosRenyi(p=0.1), directed=True)
    edges = layer_edges(layer, "follow", IDS, seed=4)
    assert reciprocity(edges) == pytest.approx(0.1, abs=0.01)
    assert set(edges.source.tolist()) <= set(IDS.tolist()) and (edges.source != edges.target).all()
    again = layer_edges(layer, "follow", IDS, seed=4)
    assert (again.source == edges.source).all() and (again.target == edges.target).all()
    other = layer_edges(layer, "follow", IDS, seed=5)
    assert len(other.source) != len(edges.source) or (other.source != edges.source).any()


def test_a_directed_barabasi_albert_layer_follows_older_agents_by_in_degree():
    edges = layer_edges(LayerSpec(generate=BarabasiAlbert(m=3), directed=True), "follow", IDS, seed=1)
    assert reciprocity(edges) == 0.0 and (edges.source > edges.target).all()  # a newer agent follows older ones
    followers = np.bincount(edges.target - 100, minlength=len(IDS))
    assert followers.max() > 10 * np.median(followers)  # a few agents are followed by many


def test_a_mutual_layer_holds_each_generated_edge_both_ways_as_before():
    mutual = layer_edges(LayerSpec(generate=BarabasiAlbert(m=3), directed=True, mutual=True), "follow", IDS, seed=1)
    undirected = layer_edges(LayerSpec(generate=BarabasiAlbert(m=3)), "follow", IDS, seed=1)
    assert reciprocity(mutual) == 1.0 and len(mutual.source) == 2 * len(undirected.source)
    assert (undirected.source < undirected.target).all()


@pytest.mark.parametrize("layer", [{"generate": {"model": "erdos_renyi", "p": 0.1}, "mutual": True},
                                   {"from": "edges.csv", "directed": True, "mutual": True}])
def test_mutual_without_a_directed_generated_layer_is_refused(layer):
    with pytest.raises(ValidationError, match="mutual: true makes a directed layer's generated edges go both ways"):
        LayerSpec.model_validate(layer)
