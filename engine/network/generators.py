"""Seeded random graphs in numpy, fast enough for a million nodes (no per-node Python loop), and linear in the
edges they make at any valid parameter (a spec bounds the edges: :func:`engine.network.spec.expected_edges`).

Each generator takes the node count, its parameters and a numpy ``Generator``, and returns the
edges as two int64 arrays over node indexes ``0..n-1`` (an undirected edge once, as ``source < target``, sorted),
with no self-loop and no repeated edge. With ``directed=True`` it returns directed edges, ``source -> target``, each
ordered pair at most once (in no particular order):

- :func:`barabasi_albert`: preferential attachment from a star of ``m + 1`` nodes; each later node
  draws ``m`` targets with probability by degree (Batagelj and Brandes' list of edge ends, resolved by
  pointer jumping instead of a loop). Two draws of one node that land on the same target make one
  edge, so a node may have slightly fewer than ``m`` new edges. Directed, it is Price's model: a new node's ``m``
  edges go out to older nodes, each chosen with probability proportional to its in-degree + 1 (the 1, Price's
  "attractiveness", lets a node no one links to yet be chosen); the in-degrees have a power-law tail of exponent
  ``2 + 1/m``, and no edge is returned (reciprocity 0).
- :func:`erdos_renyi`: G(n, p): the pairs in order, each gap to the next edge drawn from its geometric
  distribution (Batagelj and Brandes' skips), so the work is the edges' at any ``p`` (1 included). Directed,
  each ordered pair is an edge with probability ``p`` independently (two G(n, p) draws, one per direction), so a
  share ``p`` of edges is returned.
- :func:`watts_strogatz`: a ring where each node links its ``k / 2`` nearest neighbours on each side,
  each edge's far end rewired with probability ``p`` to a uniform node. A rewiring that lands on the node itself or
  on an edge there is already is drawn again (all such at once, round after round, up to :data:`REWIRE_ROUNDS`), so
  the graph keeps its ``n k / 2`` edges; an edge still pending then (a near-complete ring, where its node links
  almost every other) stays where it was. Directed, each edge is oriented at random.
- :func:`configuration`: a given degree sequence, its edge ends paired at random (self-loops and repeats
  dropped). Directed, each edge is oriented at random.
- :func:`block_model`: groups of nodes (a persona attribute's values), linked with one probability within a
  group and another between groups. Directed, each ordered pair is an edge with its probability independently
  (as Erdős–Rényi's).

An edge oriented at random is never returned, so those layers have reciprocity 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["REWIRE_ROUNDS", "barabasi_albert", "block_model", "block_probabilities", "configuration", "directed_unique",
           "erdos_renyi", "group_codes", "orient", "pair_ends", "pairs_inside", "undirected_unique", "watts_strogatz"]

Edges = tuple[np.ndarray, np.ndarray]

#: Geometric gaps drawn at once by :func:`erdos_renyi` (about 32 MB of int64 a chunk).
_GAPS_PER_CHUNK = 1 << 22
#: The most rounds of redrawing a Watts-Strogatz rewiring that landed on the node itself or on an edge there is: each
#: round redraws only the colliding ones, so a sparse ring needs two or three.
REWIRE_ROUNDS = 64


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


def directed_unique(source: np.ndarray, target: np.ndarray) -> Edges:
    """Each directed edge once, self-loops dropped, sorted by source then target."""
    keep = source != target
    if not keep.any():
        return _empty_edges()
    width = np.int64(max(source[keep].max(), target[keep].max())) + 1
    keys = np.sort(source[keep].astype(np.int64) * width + target[keep])
    keys = keys[np.concatenate([[True], keys[1:] != keys[:-1]])]
    return keys // width, keys % width


def orient(low: np.ndarray, high: np.ndarray, rng: np.random.Generator) -> Edges:
    """Each undirected edge as one directed edge, its direction drawn with probability 1/2."""
    flip = rng.random(len(low)) < 0.5
    return np.where(flip, high, low), np.where(flip, low, high)


def barabasi_albert(n: int, m: int, rng: np.random.Generator, *, directed: bool = False) -> Edges:
    """``n`` nodes (``n > m >= 1``), each after the first ``m + 1`` attaching ``m`` edges by degree; ``directed``: by
    in-degree + 1 (Price's model), each new node's edges going out from it."""
    later = (n - m - 1) * m
    total = m + later
    source = np.empty(total, dtype=np.int64)
    target = np.full(total, -1, dtype=np.int64)
    source[:m], target[:m] = np.arange(1, m + 1), 0  # the star: node 0 and nodes 1..m (directed: each to node 0)
    edge = np.arange(m, total)
    source[m:] = m + 1 + (edge - m) // m
    first = m + ((edge - m) // m) * m  # the node's first edge: the list of ends holds 2 * first entries before it
    pointer = np.full(total, -1, dtype=np.int64)
    if directed:
        # The weights in-degree + 1 of the nodes so far sum to their edges plus their number: a draw below ``first``
        # takes the target of that edge (by in-degree), one above it the node it numbers (the + 1).
        pick = np.floor(rng.random(later) * (first + source[m:])).astype(np.int64)
        by_edge = pick < first
        target[m:][~by_edge] = pick[~by_edge] - first[~by_edge]
        pointer[m:][by_edge] = pick[by_edge]
    else:
        end = np.floor(rng.random(later) * 2 * first).astype(np.int64)
        # An even end is the source of edge end // 2 (known); an odd one the target of edge end // 2 (maybe still to find).
        odd = end % 2 == 1
        target[m:][~odd] = source[end[~odd] // 2]
        pointer[m:][odd] = end[odd] // 2
    waiting = np.flatnonzero((pointer >= 0) & (target < 0))
    while waiting.size:  # an odd end's target is the target of the edge it points at: copy the known, jump the rest
        ahead = pointer[waiting]
        known = target[ahead] >= 0
        target[waiting[known]] = target[ahead[known]]
        waiting = waiting[~known]
        ahead = pointer[waiting]
        pointer[waiting] = np.where(pointer[ahead] >= 0, pointer[ahead], ahead)
    return directed_unique(source, target) if directed else undirected_unique(source, target)


def erdos_renyi(n: int, p: float, rng: np.random.Generator, *, directed: bool = False) -> Edges:
    """G(n, p): each of the n(n-1)/2 pairs an edge with probability ``p``, independently of the others; ``directed``:
    each of the n(n-1) ordered pairs.

    The pairs are numbered in the order of the output (:func:`pair_ends`), and the gap from one edge to the next is
    geometric with parameter ``p``: an exact draw whose cost is the number of edges, near ``p = 1`` as anywhere.
    """
    if directed:  # the pairs source < target, then independently the pairs source > target
        (low, high), (back_low, back_high) = erdos_renyi(n, p, rng), erdos_renyi(n, p, rng)
        return np.concatenate([low, back_high]), np.concatenate([high, back_low])
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


def watts_strogatz(n: int, k: int, p: float, rng: np.random.Generator, *, directed: bool = False) -> Edges:
    """A ring of ``n`` nodes each linked to its ``k`` nearest (``k`` even, ``k < n``), each edge rewired with
    probability ``p`` to a node it is not linked to yet (so ``n k / 2`` edges); ``directed``: each oriented at random."""
    node = np.repeat(np.arange(n, dtype=np.int64), k // 2)
    far = (node + np.tile(np.arange(1, k // 2 + 1, dtype=np.int64), n)) % n
    keys = _rewire(node, far, np.flatnonzero(rng.random(len(node)) < p), n, rng)
    low, high = keys // n, keys % n
    return orient(low, high, rng) if directed else (low, high)


def _rewire(node: np.ndarray, far: np.ndarray, pending: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    """Move the far end of each edge ``pending`` (``node[i]``-``far[i]``, distinct pairs) to a uniform node that
    makes no self-loop and no repeated edge, in place; the edges then, as sorted keys ``low * n + high``.

    Every pair there is holds its place (an edge still pending its own too, so it can stay there); a round draws a new
    end for each pending edge, keeps those that land on a free pair (the first, where two land on one), frees their
    old pairs and draws the rest again, up to :data:`REWIRE_ROUNDS` rounds: past that an edge stays where it was.
    """
    taken = np.sort(np.minimum(node, far) * n + np.maximum(node, far))
    for _ in range(REWIRE_ROUNDS):
        if not pending.size:
            break
        ends, start = rng.integers(0, n, pending.size), node[pending]
        keys = np.minimum(start, ends) * n + np.maximum(start, ends)
        order = np.argsort(keys, kind="stable")  # sorted, the look-ups walk ``taken`` in order: several times faster
        ordered = keys[order]
        clash = np.zeros(len(keys), dtype=bool)
        clash[order[1:]] = ordered[1:] == ordered[:-1]  # a pair two edges landed on: the first keeps it
        clash[order] |= taken[np.minimum(np.searchsorted(taken, ordered), len(taken) - 1)] == ordered
        free = (ends != start) & ~clash
        moved = pending[free]
        taken = np.delete(taken, np.searchsorted(taken, np.sort(np.minimum(node[moved], far[moved]) * n
                                                                 + np.maximum(node[moved], far[moved]))))
        new = np.sort(keys[free])
        taken = np.insert(taken, np.searchsorted(taken, new), new)
        far[moved] = ends[free]
        pending = pending[~free]
    return taken


def configuration(degrees: np.ndarray, rng: np.random.Generator, *, directed: bool = False) -> Edges:
    """The erased configuration model: node ``i`` gets ``degrees[i]`` edge ends, shuffled and paired; a pair
    that makes a self-loop or repeats an edge is dropped, and an odd total leaves one end unpaired. So a node
    may end with fewer edges than asked: the fit report (:mod:`engine.network.fit`) says how many. ``directed``:
    each edge oriented at random (a node's degree counts its edges both ways)."""
    ends = np.repeat(np.arange(len(degrees), dtype=np.int64), np.asarray(degrees, dtype=np.int64))
    rng.shuffle(ends)
    half = len(ends) // 2
    low, high = undirected_unique(ends[:half], ends[half : 2 * half])
    return orient(low, high, rng) if directed else (low, high)


def block_model(groups: np.ndarray, within: float, between: float, rng: np.random.Generator, *,
                directed: bool = False) -> Edges:
    """A stochastic block model: nodes ``i`` and ``j`` linked with probability ``within`` when ``groups[i] ==
    groups[j]``, else ``between``. Within each group a G(n, within); between groups a G(n, between) over all
    nodes with its within-group pairs dropped (a uniform subset of all pairs, filtered, is a uniform subset of
    the pairs between groups). ``directed``: each ordered pair independently (each node's expected out-degree and
    in-degree are then an undirected node's expected degree)."""
    if directed:  # the pairs source < target, then independently the pairs source > target
        (low, high), (back_low, back_high) = block_model(groups, within, between, rng), block_model(groups, within, between, rng)
        return np.concatenate([low, back_high]), np.concatenate([high, back_low])
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
