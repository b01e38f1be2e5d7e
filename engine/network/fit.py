"""How well a generated layer matches its model: each measure's target (what the model expects over these agents)
beside what the graph achieved, as the rows of the ``network_fit`` dataset.

Measures, over the undirected graph the generator made (a ``directed`` layer's two directions counted once):

- ``edges`` and ``mean_degree``;
- the degree distribution: ``degree_p10`` … ``degree_p99`` and ``degree_max``, each against the quantile of the
  model's degree distribution where it has one in closed form (Erdős–Rényi: binomial; Barabási–Albert: its
  limit ``2m(m+1) / (k(k+1)(k+2))``; a configuration model: the degrees asked for), and ``degree_ks``, the
  Kolmogorov–Smirnov distance between the achieved and the model's distribution (0 would be a perfect fit);
- ``clustering``, the mean local clustering coefficient (0 for a node of degree below 2), over every node up to
  :data:`EXACT_CLUSTERING` nodes and otherwise over a seeded sample of that many, against Erdős–Rényi's
  ``p``, Watts–Strogatz's ``3(k-2) / (4(k-1)) (1-p)^3`` and a configuration model's
  ``(<k^2> - <k>)^2 / (n <k>^3)``. A node's coefficient is the share of its wedges (pairs of its neighbours) that
  are linked: all of them are looked at up to :data:`WEDGES_PER_NODE`, past that a seeded sample of that many, so
  the work is bounded on a dense graph too (counting every triangle of a near-complete graph of 3,000 nodes is
  minutes);
- ``components`` and ``largest_component_share`` (a Barabási–Albert graph is connected);
- a configuration model's ``ends_kept``, the share of asked edge ends that made an edge (self-loops and repeats
  are dropped; target 1);
- a block model's ``homophily``: Coleman's index ``(s - s0) / (1 - s0)``, ``s`` the share of edges inside
  groups and ``s0`` the share of pairs inside groups, against the spec's ``homophily``.

A target the model gives no closed form for is null.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.network.spec import BarabasiAlbert, BlockModel, Configuration, ErdosRenyi, WattsStrogatz

__all__ = ["EXACT_CLUSTERING", "FitRow", "WEDGES_PER_NODE", "fit_rows"]

#: Up to this many nodes the clustering is the mean over all of them; past it, the mean over a seeded sample of this many.
EXACT_CLUSTERING = 5_000
#: Up to this many wedges a node's clustering is counted exactly; past it, from a seeded sample of this many (its
#: standard error at most 0.5 / sqrt(500), about 0.02 a node, and the mean's far less).
WEDGES_PER_NODE = 500

_QUANTILES = {"degree_p10": 0.1, "degree_p50": 0.5, "degree_p90": 0.9, "degree_p99": 0.99}


@dataclass(frozen=True)
class FitRow:
    """One measure of one layer: what the model expects and what the graph has."""

    measure: str
    target: float | None
    achieved: float
    note: str = ""


def fit_rows(model: object, n: int, low: np.ndarray, high: np.ndarray, *, asked: np.ndarray | None = None,
             groups: np.ndarray | None = None, seed: int = 0) -> list[FitRow]:
    """The fit of an undirected graph over nodes ``0..n-1`` (each edge once, ``low[i]``-``high[i]``) to ``model``.

    Args:
        asked: a configuration model's degrees as asked (one per node).
        groups: a block model's group of each node.
        seed: the seed of the clustering's sample of nodes.
    """
    from scipy import sparse
    from scipy.sparse.csgraph import connected_components

    degrees = np.bincount(np.concatenate([low, high]), minlength=n)
    ones = np.ones(2 * len(low), dtype=np.int64)
    adjacency = sparse.csr_matrix((ones, (np.concatenate([low, high]), np.concatenate([high, low]))), shape=(n, n))
    expected = _expected_edges(model, n, asked, groups)
    rows = [FitRow("edges", expected, float(len(low))),
            FitRow("mean_degree", None if expected is None else 2 * expected / n, float(degrees.mean()) if n else 0.0)]
    cdf = _degree_cdf(model, n, asked)
    for name, q in _QUANTILES.items():
        rows.append(FitRow(name, None if cdf is None else float(_quantile(cdf, q)), float(np.quantile(degrees, q))))
    rows.append(FitRow("degree_max", float(asked.max()) if asked is not None and len(asked) else None, float(degrees.max(initial=0))))
    if cdf is not None:
        achieved_cdf = np.cumsum(np.bincount(degrees)) / n
        top = max(len(achieved_cdf), len(cdf))
        ks = np.abs(_padded(achieved_cdf, top) - _padded(cdf, top)).max()
        rows.append(FitRow("degree_ks", 0.0, float(ks), "Kolmogorov-Smirnov distance from the model's degree distribution"))
    clustering, note = _clustering(low, high, degrees, seed)
    rows.append(FitRow("clustering", _expected_clustering(model, n, asked), clustering, note))
    count, labels = connected_components(adjacency, directed=False)
    rows.append(FitRow("components", 1.0 if isinstance(model, BarabasiAlbert) else None, float(count)))
    rows.append(FitRow("largest_component_share", 1.0 if isinstance(model, BarabasiAlbert) else None,
                       float(np.bincount(labels).max() / n) if n else 0.0))
    if isinstance(model, Configuration) and asked is not None:
        rows.append(FitRow("ends_kept", 1.0, float(2 * len(low) / asked.sum()) if asked.sum() else 1.0,
                           "self-loops and repeated edges are dropped"))
    if isinstance(model, BlockModel) and groups is not None:
        rows.append(FitRow("homophily", model.homophily, _coleman(groups, low, high), "Coleman's index of the groups"))
    return rows


def _expected_edges(model: object, n: int, asked: np.ndarray | None, groups: np.ndarray | None) -> float | None:
    from engine.network.generators import block_probabilities, pairs_inside

    pairs = n * (n - 1) / 2
    if isinstance(model, BarabasiAlbert):
        return float(model.m + (n - model.m - 1) * model.m)
    if isinstance(model, ErdosRenyi):
        return model.p * pairs
    if isinstance(model, WattsStrogatz):
        return n * model.k / 2
    if isinstance(model, Configuration) and asked is not None:
        return float(asked.sum() // 2)
    if isinstance(model, BlockModel) and groups is not None:
        within, between = block_probabilities(groups, model.mean_degree, model.homophily)
        pairs, inside = pairs_inside(groups)
        return within * inside + between * (pairs - inside)
    return None


def _degree_cdf(model: object, n: int, asked: np.ndarray | None) -> np.ndarray | None:
    """The model's degree distribution as a CDF over degrees 0, 1, 2 ... (None: no closed form)."""
    if isinstance(model, ErdosRenyi):
        from scipy.stats import binom

        top = int(binom.ppf(1 - 1e-9, n - 1, model.p)) + 1
        return np.asarray(binom.cdf(np.arange(top + 1), n - 1, model.p))
    if isinstance(model, BarabasiAlbert):
        m = model.m
        k = np.arange(min(int(math.sqrt(m * (m + 1) * 1e6)), n) + 2, dtype=float)  # no degree reaches n
        return np.where(k < m, 0.0, 1 - m * (m + 1) / ((k + 1) * (k + 2)))
    if isinstance(model, Configuration) and asked is not None and len(asked):
        return np.cumsum(np.bincount(asked)) / len(asked)
    return None


def _quantile(cdf: np.ndarray, q: float) -> int:
    """The smallest degree whose CDF reaches ``q``."""
    return min(int(np.searchsorted(cdf, q - 1e-12)), len(cdf) - 1)


def _padded(cdf: np.ndarray, size: int) -> np.ndarray:
    return np.concatenate([cdf, np.full(size - len(cdf), cdf[-1] if len(cdf) else 1.0)])


def _expected_clustering(model: object, n: int, asked: np.ndarray | None) -> float | None:
    if isinstance(model, ErdosRenyi):
        return model.p
    if isinstance(model, WattsStrogatz):
        return 3 * (model.k - 2) / (4 * (model.k - 1)) * (1 - model.p) ** 3
    if isinstance(model, Configuration) and asked is not None and asked.sum():
        mean, square = asked.mean(), (asked.astype(float) ** 2).mean()
        return float((square - mean) ** 2 / (n * mean**3))
    return None


def _clustering(low: np.ndarray, high: np.ndarray, degrees: np.ndarray, seed: int) -> tuple[float, str]:
    """The mean local clustering coefficient, and how it was taken (see the module: nodes and wedges sampled past
    :data:`EXACT_CLUSTERING` and :data:`WEDGES_PER_NODE`); ``low``-``high`` each undirected edge once."""
    from engine.network.generators import pair_ends

    n = len(degrees)
    rng = np.random.default_rng(seed)
    if n <= EXACT_CLUSTERING:
        nodes, notes = np.arange(n), []
    else:
        nodes = np.sort(rng.choice(n, EXACT_CLUSTERING, replace=False))
        notes = [f"the mean over a seeded sample of {EXACT_CLUSTERING:,} nodes"]
    if not len(nodes):
        return 0.0, "exact"
    ends, others = np.concatenate([low, high]), np.concatenate([high, low])
    neighbours = others[np.argsort(ends, kind="stable")]  # each node's neighbours, node by node
    starts = np.concatenate([[0], np.cumsum(degrees)])[nodes]
    k = degrees[nodes].astype(np.int64)
    wedges = k * (k - 1) // 2
    looked = np.minimum(wedges, WEDGES_PER_NODE)
    owner = np.repeat(np.arange(len(nodes)), looked)
    wedge = np.arange(len(owner)) - np.repeat(np.cumsum(looked) - looked, looked)  # 0, 1 ... within each node
    sampled = wedges[owner] > WEDGES_PER_NODE
    wedge[sampled] = np.floor(rng.random(int(sampled.sum())) * wedges[owner][sampled]).astype(np.int64)
    first, second = pair_ends(wedge, k[owner])
    u, v = neighbours[starts[owner] + first], neighbours[starts[owner] + second]
    linked = np.sort(np.minimum(low, high).astype(np.int64) * n + np.maximum(low, high))
    asked = np.minimum(u, v).astype(np.int64) * n + np.maximum(u, v)
    at = np.minimum(np.searchsorted(linked, asked), max(len(linked) - 1, 0))
    closed = np.bincount(owner, weights=linked[at] == asked if len(linked) else np.zeros(len(asked)), minlength=len(nodes))
    with np.errstate(divide="ignore", invalid="ignore"):
        local = np.where(looked > 0, closed / looked, 0.0)
    if (wedges > WEDGES_PER_NODE).any():
        notes.append(f"a node of over {WEDGES_PER_NODE:,} neighbour pairs from a seeded sample of that many")
    return float(local.mean()), "; ".join(notes) or "exact"


def _coleman(groups: np.ndarray, low: np.ndarray, high: np.ndarray) -> float:
    from engine.network.generators import pairs_inside

    pairs, inside = pairs_inside(groups)
    s0 = inside / pairs if pairs else 0.0
    s = float((groups[low] == groups[high]).mean()) if len(low) else 0.0
    return (s - s0) / (1 - s0) if s0 < 1 else 1.0
