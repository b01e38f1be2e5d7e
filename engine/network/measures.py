"""A follow graph's measures at one moment, cheap enough to take every tick on a million nodes: the
``network_measures`` rows an env module that holds a layer writes each step.

- ``edges``, ``mean_degree`` (out-degree, which is the in-degree's mean too), the in-degree's ``p50``, ``p99``
  and ``max`` (followers: where the hubs are) and the out-degree's ``max``;
- ``reciprocity``: the share of edges whose reverse is an edge too (1 for an undirected layer);
- ``ei_index``, given each agent's group (a persona field): Krackhardt and Stern's E-I index, the share of edges
  between groups less the share inside them (-1: all inside, 1: all between); null without groups;
- ``clustering``: the mean local clustering coefficient of the undirected view (an edge either way links two
  nodes), over a seeded sample of :data:`CLUSTERING_SAMPLE` nodes, the same nodes every tick, so a change
  between ticks is the graph's and not the sample's.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from engine.network.graph import Graph

__all__ = ["CLUSTERING_SAMPLE", "graph_measures"]

#: Nodes whose local clustering is averaged each tick.
CLUSTERING_SAMPLE = 200


def graph_measures(graph: Graph, seed: int = 0, groups: Mapping[int, object] | None = None) -> dict[str, float | None]:
    """The measures of ``graph`` now, changes included; with ``groups`` (agent -> its group), the E-I index."""
    out, into = graph.degrees()
    n = len(graph.nodes)
    edges = int(out.sum())
    measures: dict[str, float | None] = {"edges": float(edges), "mean_degree": edges / n if n else 0.0,
                "in_degree_p50": float(np.quantile(into, 0.5)) if n else 0.0,
                "in_degree_p99": float(np.quantile(into, 0.99)) if n else 0.0,
                "in_degree_max": float(into.max(initial=0)), "out_degree_max": float(out.max(initial=0))}
    source, target = graph.edges()
    if edges:
        width = int(graph.nodes.max()) + 1 if n else 1
        forward = source * width + target  # ascending: the edges come sorted by source, then target
        backward = target * width + source
        at = np.minimum(np.searchsorted(forward, backward), edges - 1)
        measures["reciprocity"] = float((forward[at] == backward).mean())
    else:
        measures["reciprocity"] = 0.0
    measures["clustering"] = _sampled_clustering(graph, seed)
    measures["ei_index"] = _ei_index(source, target, groups) if groups else None
    return measures


def _ei_index(source: np.ndarray, target: np.ndarray, groups: Mapping[int, object]) -> float | None:
    """Krackhardt and Stern's E-I index, (external - internal) / all, over the edges whose two ends have a group."""
    codes: dict[object, int] = {}
    ids = np.fromiter(groups, dtype=np.int64, count=len(groups))
    values = np.fromiter((codes.setdefault(v, len(codes)) for v in groups.values()), dtype=np.int64, count=len(groups))
    order = np.argsort(ids)
    ids, values = ids[order], values[order]

    def group_of(ends: np.ndarray) -> np.ndarray:
        at = np.minimum(np.searchsorted(ids, ends), len(ids) - 1)
        return np.where(ids[at] == ends, values[at], -1)

    a, b = group_of(source), group_of(target)
    known = (a >= 0) & (b >= 0)
    if not known.any():
        return None
    internal = int((a[known] == b[known]).sum())
    return (int(known.sum()) - 2 * internal) / int(known.sum())


def _sampled_clustering(graph: Graph, seed: int) -> float:
    nodes = graph.nodes
    if not len(nodes):
        return 0.0
    picked = nodes if len(nodes) <= CLUSTERING_SAMPLE else np.sort(
        np.random.default_rng(seed).choice(nodes, CLUSTERING_SAMPLE, replace=False))
    total = 0.0
    for node in picked.tolist():
        around = _neighbours(graph, node)
        k = len(around)
        if k < 2:
            continue
        links = sum(int(np.isin(_neighbours(graph, other), around, assume_unique=True).sum()) for other in around.tolist())
        total += links / (k * (k - 1))  # each link between two neighbours is counted from both ends
    return total / len(picked)


def _neighbours(graph: Graph, node: int) -> np.ndarray:
    """The nodes linked to ``node`` either way, itself left out."""
    both = np.union1d(np.asarray(graph.successors(node), dtype=np.int64), np.asarray(graph.predecessors(node), dtype=np.int64))
    return both[both != node]
