"""Seeded random graphs in numpy, fast enough for a million nodes (no per-node Python loop), and linear in the
edges they make at any valid parameter (a spec bounds the edges: :func:`engine.network.spec.expected_edges`).

Each generator takes the node count, its parameters and a numpy ``Generator``, and returns the
edges as two int64 arrays over node indexes ``0..n-1`` (an undirected edge once, as ``source < target``),
with no self-loop and no repeated edge.

- :func:`barabasi_albert`: preferential attachment from a star of ``m + 1`` nodes; each later node
  draws ``m`` targets with probability by degree (Batagelj and Brandes' list of edge ends, resolved by
  pointer jumping instead of a loop). Two draws of one node that land on the same target make one
  edge, so a node may have slightly fewer than ``m`` new edges.
- :func:`erdos_renyi`: G(n, p): the pairs in order, each gap to the next edge drawn from its geometric
  distribution (Batagelj and Brandes' skips), so the work is the edges' at any ``p`` (1 included).
- :func:`watts_strogatz`: a ring where each node links its ``k / 2`` nearest neighbours on each side,
  each edge's far end rewired with probability ``p`` to a uniform node (a rewiring onto an existing
  edge or the node itself is dropped).
- :func:`configuration`: a given degree sequence, its edge ends paired at random (self-loops and repeats
  dropped).
- :func:`block_model`: groups of nodes (a persona attribute's values), linked with one probability within a
  group and another between groups.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["barabasi_albert", "block_model", "block_probabilities", "configuration", "erdos_renyi", "group_codes", "pair_ends",
           "pairs_inside", "undirected_unique", "watts_strogatz"]

Edges = tuple[np.ndarray, np.ndarray]

#: Geometric gaps drawn at once by :func:`erdos_renyi` (about 32 MB of int64 a chunk).
_GAPS_PER_CHUNK = 1 << 22


def undirected_unique(source: np.ndarray, target: np.ndarray) -> Edges:
    """Each undirected edge once, as ``(low, high)``, self-loops dropped, sorted."""
    low, high = np.minimum(source, target), np.maximum(source, target)
    keep = low != high
    if not keep.any():
        return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)
    width = np.int64(high[keep].max()) + 1
    keys = np.sort(low[keep].astype(np.int64) * width + high[keep])  # one int64 per pair: a 1-D sort, not rows
    keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]  # (np.unique hashes: several times slower here)
    return keys // width, keys % width


def barabasi_albert(n: int, m: int, rng: np.random.Generator) -> Edges:
    """``n`` nodes (``n > m >= 1``), each after the first ``m + 1`` attaching ``m`` edges by degree."""
    later = (n - m - 1) * m
    total = m + later
    source = np.empty(total, dtype=np.int64)
    target = np.full(total, -1, dtype=np.int64)
    source[:m], target[:m] = np.arange(1, m + 1), 0  # the star: node 0 and nodes 1..m
    edge = np.arange(m, total)
    source[m:] = m + 1 + (edge - m) // m
    first = m + ((edge - m) // m) * m  # the node's first edge: the list of ends holds 2 * first entries before it
    end = np.floor(rng.random(later) * 2 * first).astype(np.int64)
    # An even end is the source of edge end // 2 (known); an odd one the target of edge end // 2 (maybe still to find).
    odd = end % 2 == 1
    target[m:][~odd] = source[end[~odd] // 2]
    pointer = np.full(total, -1, dtype=np.int64)
    pointer[m:][odd] = end[odd] // 2
    waiting = np.flatnonzero(pointer >= 0)
    while waiting.size:  # an odd end's target is the target of the edge it points at: copy the known, jump the rest
        ahead = pointer[waiting]
        known = target[ahead] >= 0
        target[waiting[known]] = target[ahead[known]]
        waiting = waiting[~known]
        ahead = pointer[waiting]
        pointer[waiting] = np.where(pointer[ahead] >= 0, pointer[ahead], ahead)
    return undirected_unique(source, target)


def erdos_renyi(n: int, p: float, rng: np.random.Generator) -> Edges:
    """G(n, p), undirected: each of the n(n-1)/2 pairs an edge with probability ``p``, independently of the others.

    The pairs are numbered in the order of the output (:func:`pair_ends`), and the gap from one edge to the next is
    geometric with parameter ``p``: an exact draw whose cost is the number of edges, near ``p = 1`` as anywhere.
    """
    pairs = n * (n - 1) // 2
    if pairs <= 0 or p <= 0:
        return _empty_edges()
    if p >= 1:
        return pair_ends(np.arange(pairs, dtype=np.int64), n)
    # Each gap is capped at ``pairs`` (one past it ends the graph either way), and a chunk is small enough that its
    # capped gaps cannot overflow int64 when summed.
    largest_chunk = max(1, min(_GAPS_PER_CHUNK, (2**62) // pairs))
    chunks, last = [], -1
    while True:
        left = pairs - 1 - last
        size = int(min(largest_chunk, left * p + 4 * math.sqrt(left * p) + 16))
        positions = last + np.cumsum(np.minimum(rng.geometric(p, size), pairs))
        if positions[-1] >= pairs:
            chunks.append(positions[: np.searchsorted(positions, pairs)])
            break
        chunks.append(positions)
        last = int(positions[-1])
    return pair_ends(np.concatenate(chunks), n)


def pair_ends(index: np.ndarray, n: int | np.ndarray) -> Edges:
    """The pairs ``(low, high)``, ``low < high < n``, numbered ``index`` in order by ``low`` then ``high``: pair 0 is
    ``(0, 1)``, pair ``n - 2`` is ``(0, n - 1)``, pair ``n - 1`` is ``(1, 2)`` ... (ascending numbers give pairs in order).

    Counted from the last pair back, the rows of equal ``low`` grow by one (1 pair with ``low = n - 2``, then 2 ...):
    a triangle, whose row of ``r`` is a square root, corrected by one where floating point rounds across a row.
    """
    index = np.asarray(index, dtype=np.int64)
    back = n * (n - 1) // 2 - 1 - index
    row = ((np.sqrt(8 * back.astype(np.float64) + 1) - 1) // 2).astype(np.int64)
    row -= row * (row + 1) // 2 > back
    row += (row + 1) * (row + 2) // 2 <= back
    return n - 2 - row, n - 1 - (back - row * (row + 1) // 2)


def watts_strogatz(n: int, k: int, p: float, rng: np.random.Generator) -> Edges:
    """A ring of ``n`` nodes each linked to its ``k`` nearest (``k`` even, ``k < n``), each edge rewired with probability ``p``."""
    node = np.repeat(np.arange(n, dtype=np.int64), k // 2)
    far = (node + np.tile(np.arange(1, k // 2 + 1, dtype=np.int64), n)) % n
    rewire = rng.random(len(node)) < p
    far[rewire] = rng.integers(0, n, int(rewire.sum()))
    return undirected_unique(node, far)


def configuration(degrees: np.ndarray, rng: np.random.Generator) -> Edges:
    """The erased configuration model: node ``i`` gets ``degrees[i]`` edge ends, shuffled and paired; a pair
    that makes a self-loop or repeats an edge is dropped, and an odd total leaves one end unpaired. So a node
    may end with fewer edges than asked: the fit report (:mod:`engine.network.fit`) says how many."""
    ends = np.repeat(np.arange(len(degrees), dtype=np.int64), np.asarray(degrees, dtype=np.int64))
    rng.shuffle(ends)
    half = len(ends) // 2
    return undirected_unique(ends[:half], ends[half : 2 * half])


def block_model(groups: np.ndarray, within: float, between: float, rng: np.random.Generator) -> Edges:
    """A stochastic block model: nodes ``i`` and ``j`` linked with probability ``within`` when ``groups[i] ==
    groups[j]``, else ``between``. Within each group a G(n, within); between groups a G(n, between) over all
    nodes with its within-group pairs dropped (a uniform subset of all pairs, filtered, is a uniform subset of
    the pairs between groups)."""
    groups = np.asarray(groups)
    parts = [_empty_edges()]
    for group in np.unique(groups):
        members = np.flatnonzero(groups == group)
        low, high = erdos_renyi(len(members), within, rng)
        parts.append((members[low], members[high]))
    low, high = erdos_renyi(len(groups), between, rng)
    across = groups[low] != groups[high]
    parts.append((low[across], high[across]))
    source = np.concatenate([p[0] for p in parts])
    target = np.concatenate([p[1] for p in parts])
    order = np.lexsort((target, source))
    return source[order], target[order]


def _empty_edges() -> Edges:
    return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.int64)


def group_codes(values: Sequence[object]) -> np.ndarray:
    """Each value's group, numbered in order of first appearance (None, no value, is a group of its own)."""
    codes: dict[str, int] = {}
    return np.fromiter((codes.setdefault(repr(value), len(codes)) for value in values), dtype=np.int64, count=len(values))


def pairs_inside(groups: np.ndarray) -> tuple[float, float]:
    """All pairs of nodes, and those whose two nodes are in the same group."""
    n, sizes = len(groups), np.bincount(groups).astype(float)
    return n * (n - 1) / 2, float((sizes * (sizes - 1) / 2).sum())


def block_probabilities(groups: np.ndarray, mean_degree: float, homophily: float) -> tuple[float, float]:
    """The within- and between-group edge probabilities that give ``mean_degree`` expected edges per node and a
    share ``s0 + homophily * (1 - s0)`` of them inside groups (``s0``: the share of pairs that are inside groups).
    Either may come out above 1: the caller refuses that."""
    pairs, inside = pairs_inside(groups)
    expected = mean_degree * len(groups) / 2
    share = inside / pairs + homophily * (1 - inside / pairs) if pairs else 0.0
    within = share * expected / inside if inside else (0.0 if share == 0 else np.inf)
    between = (1 - share) * expected / (pairs - inside) if pairs > inside else (0.0 if share == 1 else np.inf)
    return float(within), float(between)
