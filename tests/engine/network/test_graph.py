"""The CSR graph with its change overlay: reads, changes, the overlay as saved state, degrees."""

from __future__ import annotations

import numpy as np
import pytest

from engine.network.graph import Graph


def base() -> Graph:
    return Graph(np.array([0, 0, 3, 2]), np.array([2, 1, 0, 0]), nodes=range(5), layer="follow")


def test_rows_are_read_both_ways_ascending() -> None:
    graph = base()
    assert [graph.successors(n) for n in range(5)] == [[1, 2], [], [0], [0], []]
    assert [graph.predecessors(n) for n in range(5)] == [[2, 3], [0], [0], [], []]
    assert graph.has_edge(0, 2) and not graph.has_edge(2, 3) and graph.edge_count == 4
    assert graph.successors(99) == [] and graph.predecessors(-5) == []


def test_changes_overlay_the_base_and_undo_each_other() -> None:
    graph = base()
    assert graph.add_edge(4, 0) and not graph.add_edge(4, 0) and not graph.add_edge(0, 1)
    assert graph.remove_edge(0, 1) and not graph.remove_edge(0, 1) and not graph.remove_edge(1, 4)
    assert graph.successors(0) == [2] and graph.predecessors(0) == [2, 3, 4] and graph.edge_count == 4
    assert graph.changes() == {"added": [[4, 0]], "removed": [[0, 1]]}
    out, into = graph.degrees()
    assert out.tolist() == [1, 0, 1, 1, 1] and into.tolist() == [3, 0, 1, 0, 0]
    source, target = graph.edges()
    assert list(zip(source.tolist(), target.tolist(), strict=True)) == [(0, 2), (2, 0), (3, 0), (4, 0)]
    # adding back what was removed (and the reverse) leaves no change at all
    assert graph.add_edge(0, 1) and graph.remove_edge(4, 0)
    assert graph.changes() == {"added": [], "removed": []} and not graph.changed


def test_the_saved_changes_rebuild_the_same_graph_on_its_base() -> None:
    graph = base()
    graph.add_edge(1, 4)
    graph.remove_edge(3, 0)
    again = base().with_changes(graph.changes())
    assert again.changes() == graph.changes() and again.layer == "follow"
    assert [again.successors(n) for n in range(5)] == [graph.successors(n) for n in range(5)]
    assert base().with_changes({}).changes() == {"added": [], "removed": []}


def test_from_adjacency_drops_self_loops_and_repeats() -> None:
    graph = Graph.from_adjacency({1: [2, 2, 1], 3: []}, nodes=[7])
    assert graph.nodes.tolist() == [1, 2, 3, 7] and graph.edge_count == 1 and graph.layer is None


@pytest.mark.parametrize("n", [1, 1000])
def test_a_random_graph_reads_as_its_edge_list(n: int) -> None:
    rng = np.random.default_rng(n)
    pairs = {(int(a), int(b)) for a, b in rng.integers(0, n, size=(5 * n, 2)) if a != b}
    source, target = (np.array(side, dtype=np.int64) for side in zip(*pairs, strict=True)) if pairs else (np.empty(0, np.int64),) * 2
    graph = Graph(source, target, nodes=range(n))
    for node in range(n):
        assert graph.successors(node) == sorted(b for a, b in pairs if a == node)
        assert graph.predecessors(node) == sorted(a for a, b in pairs if b == node)


def test_ids_below_two_to_the_31_are_held_as_int32_and_larger_ones_as_int64():
    small = Graph(np.array([0, 1, 2]), np.array([1, 2, 0]))
    big = Graph(np.array([0, 2**40]), np.array([2**40, 0]))
    assert small.nbytes() == 3 * 8 + 3 * 4 + 4 * 8  # nodes, indices (int32), indptr
    assert big.successors(0) == [2**40] and big.predecessors(0) == [2**40] and big.has_edge(2**40, 0)
    source, target = small.edges()
    assert source.dtype == target.dtype == np.int64 and target.tolist() == [1, 2, 0]
