"""How well a generated layer matches its model: each measure's target (what the model expects over these agents)
beside what the graph achieved, as the rows of the ``network_fit`` dataset.

Measures, over the undirected graph the generator made; a ``directed`` layer is measured as the undirected graph its
edges make (a pair linked either way is one edge), against what the model expects of that graph, and has two rows
more, ``directed_edges`` and ``reciprocity`` (below):

- ``edges`` and ``mean_degree``;
- the degree distribution: ``degree_p10`` … ``degree_p99`` and ``degree_max``, each against the quantile of the
  model's degree distribution where it has one in closed form (Erdős–Rényi: binomial; Barabási–Albert: its
  limit ``2m(m+1) / (k(k+1)(k+2))``, directed, Price's with attractiveness 1: ``m`` plus an in-degree ``j`` of
  probability ``B(j+1, 2+1/m) / B(1, 1+1/m)``; a configuration model: the degrees asked for), and ``degree_ks``, the
  Kolmogorov–Smirnov distance between the achieved and the model's distribution (0 would be a perfect fit). A
  quantile is a degree, on both sides: the smallest whose share of nodes at or below it reaches ``q`` (numpy's
  ``inverted_cdf``), never a value between two degrees;
- ``clustering``, the mean local clustering coefficient (0 for a node of degree below 2, as networkx's
  ``average_clustering``), over every node up to :data:`EXACT_CLUSTERING` nodes and otherwise over a seeded sample
  of that many. A node's coefficient is the share of its wedges (pairs of its neighbours) that are linked: all of
  them are looked at up to :data:`WEDGES_PER_NODE`, past that a seeded sample of that many, so the work is bounded
  on a dense graph too (counting every triangle of a near-complete graph of 3,000 nodes is minutes);
- ``transitivity``, the global clustering: 3 × triangles / connected triples, the share of all wedges that are
  closed (networkx's ``transitivity``), from every wedge up to :data:`TRANSITIVITY_WEDGES` and otherwise from a
  seeded uniform sample of that many. It weighs a node by its wedges, so hubs count far more than in ``clustering``;
- ``components`` and ``largest_component_share`` (a Barabási–Albert graph is connected);
- a configuration model's ``ends_kept``, the share of asked edge ends that made an edge (self-loops and repeats
  are dropped; target 1);
- a block model's ``coleman_index[<group>]``, Coleman's (1958) homophily index of each group, and
  ``coleman_index_pooled``, the index of all groups pooled (the spec's ``homophily``); in a directed layer over its
  directed edges (each edge's two ends), whose expected shares are the undirected model's;
- a directed layer's ``directed_edges``, and ``reciprocity``, the share of its edges whose reverse is an edge
  (networkx's ``reciprocity``): ``p`` for Erdős–Rényi (each ordered pair drawn independently), ``(w² P_in + b² P_out)
  / (w P_in + b P_out)`` for a block model (``w`` and ``b`` its probabilities within and between groups, ``P_in`` and
  ``P_out`` the pairs inside and between), 0 for the others (Price's model links a node only to older ones; the
  ring and the configuration model orient each edge at random), 1 for a ``mutual`` layer.

A directed Erdős–Rényi graph, undirected, is G(n, 2p - p²), and a directed block model a block model of
probabilities ``1 - (1 - w)²`` and ``1 - (1 - b)²``: their targets are those.

The targets of ``clustering`` and ``transitivity`` are the model's expectation for the graph actually built, at
its node count: Erdős–Rényi's ``p × P(degree ≥ 2)`` (a node of degree below 2 counts 0; degree ~ Binomial(n-1, p))
and ``p``; a ring lattice (Watts–Strogatz at ``p = 0``, ``n > 3k/2``) ``3(k-2) / (4(k-1))`` for both. No closed form
fits the others at a finite ``n`` (Watts–Strogatz's ``3(k-2) / (4(k-1)) (1-p)^3`` and Newman's
``(<k^2> - <k>)^2 / (n <k>^3)`` for a configuration model are large-``n`` limits, the latter of the multigraph before
its self-loops and repeats are erased: 1.62 at 100 nodes of the docs' degree distribution), so the target is
simulated: the mean of seeded draws (:data:`SIMULATED_DRAWS`) of the same generator over the same nodes (a
configuration model's asked degrees, a block model's groups), each measured the same way, as the row's note says.
Past :data:`SIMULATED_EDGES` edges a layer is not simulated: its target is null (Watts–Strogatz: the large-``n``
limit), and the note says so.

Coleman's index of group ``g``: ``s`` the share of its members' tie ends that reach its own members, ``w = (n_g -
1) / (n - 1)`` the share a member would have with ties at random (its own group among the others), ``(s - w) / (1 -
w)`` when ``s ≥ w`` and ``(s - w) / w`` when below (as R's netseg ``coleman``, Bojanowski and Corten 2014). Its target
is the index of the ties the block model expects. The pooled index, ``(s - s0) / (1 - s0)`` with ``s`` the share of
edges inside groups and ``s0`` the share of pairs inside groups, is what the spec's ``homophily`` sets; it can hide a
minority: groups of 900 and 100 at homophily 0.5 have 0.52 and 0.11 each.

A target the model gives no closed form for (and that is not simulated) is null.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.network.spec import BarabasiAlbert, BlockModel, Configuration, ErdosRenyi, WattsStrogatz

__all__ = ["EXACT_CLUSTERING", "FitRow", "GROUP_ROWS", "SIMULATED_DRAWS", "SIMULATED_EDGES", "SIMULATED_WORK",
           "TRANSITIVITY_WEDGES", "WEDGES_PER_NODE", "fit_rows"]

#: Up to this many nodes the clustering is the mean over all of them; past it, the mean over a seeded sample of this many.
EXACT_CLUSTERING = 5_000
#: Up to this many wedges a node's clustering is counted exactly; past it, from a seeded sample of this many (its
#: standard error at most 0.5 / sqrt(500), about 0.02 a node, and the mean's far less).
WEDGES_PER_NODE = 500
#: Up to this many wedges in all the transitivity counts each; past it, a seeded uniform sample of this many (its
#: standard error at most 0.5 / sqrt(1,000,000) = 0.0005).
TRANSITIVITY_WEDGES = 1_000_000
#: The fewest and the most seeded draws of a layer's generator whose mean is a clustering or transitivity target no
#: closed form gives: as many as make and measure :data:`SIMULATED_WORK` edges and wedges in all, within these bounds
#: (a small graph's clustering varies most from draw to draw, and its draws cost least).
SIMULATED_DRAWS = (8, 100)
#: Edges made and wedges looked at, over all the draws of a simulated target, unless the fewest draws need more
#: (about 0.4 s on 2 busy cores).
SIMULATED_WORK = 2_000_000
#: Past this many expected edges a layer's targets are not simulated (8 draws of 1,000,000 edges, each made and
#: measured, take 5 to 12 s on 2 busy cores).
SIMULATED_EDGES = 1_000_000
#: A block model's groups with a ``coleman_index[<group>]`` row each: the largest this many.
GROUP_ROWS = 100

_QUANTILES = {"degree_p10": 0.1, "degree_p50": 0.5, "degree_p90": 0.9, "degree_p99": 0.99}


@dataclass(frozen=True)
class FitRow:
    """One measure of one layer: what the model expects and what the graph has."""

    measure: str
    target: float | None
    achieved: float | None
    note: str = ""


@dataclass(frozen=True)
class _Closure:
    """A graph's mean local clustering and transitivity, each with how it was taken."""

    clustering: float
    clustering_note: str
    transitivity: float
    transitivity_note: str
    #: edges and wedges looked at: the cost of measuring the graph
    work: int


def fit_rows(model: object, n: int, source: np.ndarray, target: np.ndarray, *, directed: bool = False, mutual: bool = False,
             asked: np.ndarray | None = None, groups: np.ndarray | None = None, group_names: Sequence[str] | None = None,
             seed: int = 0) -> list[FitRow]:
    """The fit of a graph over nodes ``0..n-1`` to ``model``: undirected (each edge once, ``source[i]``-``target[i]``),
    or ``directed`` (each edge once, ``source[i]`` to ``target[i]``), measured as the undirected graph it makes.

    Args:
        directed: the edges go from ``source`` to ``target``, as the layer's generator made them (the module says how
            each model draws a directed graph).
        mutual: a directed layer whose generated edges are each there both ways (``mutual: true``).
        asked: a configuration model's degrees as asked (one per node).
        groups: a block model's group of each node (``0, 1 ...``).
        group_names: each group's name, by its number (``coleman_index[<name>]``); without it, the number.
        seed: the seed of the clustering's samples and of the simulated targets.
    """
    from scipy import sparse
    from scipy.sparse.csgraph import connected_components

    from engine.network.generators import undirected_unique

    low, high = undirected_unique(source, target) if directed else (source, target)
    oriented = directed and not mutual  # the generator drew a directed graph
    degrees = np.bincount(np.concatenate([low, high]), minlength=n)
    ones = np.ones(2 * len(low), dtype=np.int64)
    adjacency = sparse.csr_matrix((ones, (np.concatenate([low, high]), np.concatenate([high, low]))), shape=(n, n))
    expected = _expected_edges(model, n, asked, groups, oriented)
    rows = [FitRow("edges", expected, float(len(low)), "a pair linked either way is one edge" if directed else ""),
            FitRow("mean_degree", None if expected is None else 2 * expected / n, float(degrees.mean()) if n else 0.0)]
    if directed:
        rows.extend(_directed_rows(model, n, asked, groups, mutual, source, target))
    cdf = _degree_cdf(model, n, asked, oriented)
    for name, q in _QUANTILES.items():
        rows.append(FitRow(name, None if cdf is None else float(_quantile(cdf, q)),
                           float(np.quantile(degrees, q, method="inverted_cdf")) if n else None))
    rows.append(FitRow("degree_max", float(asked.max()) if asked is not None and len(asked) else None, float(degrees.max(initial=0))))
    if cdf is not None:
        achieved_cdf = np.cumsum(np.bincount(degrees)) / n
        top = max(len(achieved_cdf), len(cdf))
        ks = np.abs(_padded(achieved_cdf, top) - _padded(cdf, top)).max()
        rows.append(FitRow("degree_ks", 0.0, float(ks), "Kolmogorov-Smirnov distance from the model's degree distribution"))
    closure = _closure(low, high, n, seed)
    clustering, transitivity, how = _closure_targets(model, n, asked, groups, seed, expected, closure.work, oriented)
    rows.append(FitRow("clustering", clustering, closure.clustering, _joined(how, closure.clustering_note)))
    rows.append(FitRow("transitivity", transitivity, closure.transitivity, _joined(how, closure.transitivity_note)))
    count, labels = connected_components(adjacency, directed=False)
    rows.append(FitRow("components", 1.0 if isinstance(model, BarabasiAlbert) else None, float(count)))
    rows.append(FitRow("largest_component_share", 1.0 if isinstance(model, BarabasiAlbert) else None,
                       float(np.bincount(labels).max() / n) if n else 0.0))
    if isinstance(model, Configuration) and asked is not None:
        rows.append(FitRow("ends_kept", 1.0, float(2 * len(low) / asked.sum()) if asked.sum() else 1.0,
                           "self-loops and repeated edges are dropped"))
    if isinstance(model, BlockModel) and groups is not None:  # a directed layer's over its directed edges
        rows.extend(_coleman_rows(model, groups, group_names, source, target))
    return rows


def _joined(*notes: str) -> str:
    return "; ".join(note for note in notes if note)


def _either_way(p: float, oriented: bool) -> float:
    """The probability that a pair is linked either way when each direction is drawn with probability ``p``
    (``oriented``), else ``p``."""
    return 1 - (1 - p) ** 2 if oriented else p


def _expected_edges(model: object, n: int, asked: np.ndarray | None, groups: np.ndarray | None,
                    oriented: bool = False) -> float | None:
    """The undirected edges ``model`` expects (``oriented``: of the undirected graph its directed one makes)."""
    from engine.network.generators import block_probabilities, pairs_inside

    pairs = n * (n - 1) / 2
    if isinstance(model, BarabasiAlbert):
        return float(model.m + (n - model.m - 1) * model.m)
    if isinstance(model, ErdosRenyi):
        return _either_way(model.p, oriented) * pairs
    if isinstance(model, WattsStrogatz):
        return n * model.k / 2
    if isinstance(model, Configuration) and asked is not None:
        return float(asked.sum() // 2)
    if isinstance(model, BlockModel) and groups is not None:
        within, between = block_probabilities(groups, model.mean_degree, model.homophily)
        pairs, inside = pairs_inside(groups)
        return _either_way(within, oriented) * inside + _either_way(between, oriented) * (pairs - inside)
    return None


def _directed_rows(model: object, n: int, asked: np.ndarray | None, groups: np.ndarray | None, mutual: bool,
                   source: np.ndarray, target: np.ndarray) -> list[FitRow]:
    """A directed layer's ``directed_edges`` and ``reciprocity``, each against the model's."""
    from engine.network.generators import block_probabilities, pairs_inside

    undirected = _expected_edges(model, n, asked, groups)
    arcs: float | None = None if undirected is None else undirected * (2 if mutual else 1)
    reciprocity: float | None = 1.0 if mutual else 0.0
    if isinstance(model, ErdosRenyi) and not mutual:
        arcs, reciprocity = model.p * n * (n - 1), model.p
    if isinstance(model, BlockModel) and groups is not None and not mutual:
        within, between = block_probabilities(groups, model.mean_degree, model.homophily)
        pairs, inside = pairs_inside(groups)
        linked = within * inside + between * (pairs - inside)
        arcs = 2 * linked
        reciprocity = (within**2 * inside + between**2 * (pairs - inside)) / linked if linked else None
    keys = np.sort(source.astype(np.int64) * n + target)
    reverse = target.astype(np.int64) * n + source
    found = keys[np.minimum(np.searchsorted(keys, reverse), len(keys) - 1)] == reverse if len(keys) else reverse < 0
    return [FitRow("directed_edges", arcs, float(len(source))),
            FitRow("reciprocity", reciprocity, float(found.mean()) if len(found) else None,
                   "the share of edges whose reverse is an edge (networkx's reciprocity); the other rows but Coleman's "
                   "measure the layer as undirected")]


def _degree_cdf(model: object, n: int, asked: np.ndarray | None, oriented: bool = False) -> np.ndarray | None:
    """The model's degree distribution as a CDF over degrees 0, 1, 2 ... (None: no closed form); ``oriented``: of the
    undirected graph its directed one makes."""
    if isinstance(model, ErdosRenyi):
        from scipy.stats import binom

        p = _either_way(model.p, oriented)
        top = int(binom.ppf(1 - 1e-9, n - 1, p)) + 1
        return np.asarray(binom.cdf(np.arange(top + 1), n - 1, p))
    if isinstance(model, BarabasiAlbert) and oriented:  # m out, and an in-degree of Price's model (attractiveness 1)
        from scipy.special import betaln

        m = model.m
        k = np.arange(n + 1, dtype=float)  # its tail, near k^-(1 + 1/m), is too heavy to cut short
        above = np.exp(betaln(np.maximum(k - m, 0) + 2, 1 + 1 / m) - betaln(1, 1 + 1 / m))  # P(in-degree > k - m)
        return np.where(k < m, 0.0, 1 - above)
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


def _closure_targets(model: object, n: int, asked: np.ndarray | None, groups: np.ndarray | None, seed: int,
                     edges: float | None, work: int, oriented: bool = False) -> tuple[float | None, float | None, str]:
    """The model's mean local clustering and transitivity over ``n`` nodes, and a note on how they were had (empty:
    a closed form; see the module); ``work``: what measuring the graph took (:attr:`_Closure.work`); ``oriented``: of
    the undirected graph the model's directed one makes."""
    if isinstance(model, ErdosRenyi):
        from scipy.stats import binom

        p = _either_way(model.p, oriented)
        return p * float(binom.sf(1, n - 1, p)) if n > 1 else 0.0, p, ""
    if isinstance(model, WattsStrogatz) and model.p == 0 and 2 * n > 3 * model.k:
        lattice = 3 * (model.k - 2) / (4 * (model.k - 1))  # a ring lattice: every node's, so the transitivity too
        return lattice, lattice, ""
    draw_graph = _drawer(model, n, asked, groups, oriented)
    if edges is None or draw_graph is None:
        return None, None, ""
    if edges > SIMULATED_EDGES:
        if isinstance(model, WattsStrogatz):
            limit = 3 * (model.k - 2) / (4 * (model.k - 1)) * (1 - model.p) ** 3
            return limit, limit, f"target: the large-n limit (not simulated past {SIMULATED_EDGES:,} edges)"
        return None, None, f"target not simulated past {SIMULATED_EDGES:,} edges"
    fewest, most = SIMULATED_DRAWS
    count = min(most, max(fewest, SIMULATED_WORK // max(work, 1)))
    draws = [_closure(*draw_graph(np.random.default_rng([seed, 0xF17, draw])), n, seed) for draw in range(count)]
    return (float(np.mean([d.clustering for d in draws])), float(np.mean([d.transitivity for d in draws])),
            f"target simulated: mean of {count} seeded draws")


def _drawer(model: object, n: int, asked: np.ndarray | None, groups: np.ndarray | None,
            oriented: bool = False) -> Callable[[np.random.Generator], tuple[np.ndarray, np.ndarray]] | None:
    """Another draw of ``model``'s graph over the same nodes, from a generator (None: it cannot be drawn again);
    ``oriented``: the undirected graph of a draw of its directed one (a ring's or a configuration model's is its
    undirected graph: their directed one orients each edge)."""
    from engine.network import generators

    if isinstance(model, BarabasiAlbert):
        if oriented:
            return lambda rng: generators.undirected_unique(*generators.barabasi_albert(n, model.m, rng, directed=True))
        return lambda rng: generators.barabasi_albert(n, model.m, rng)
    if isinstance(model, WattsStrogatz):
        return lambda rng: generators.watts_strogatz(n, model.k, model.p, rng)
    if isinstance(model, Configuration) and asked is not None:
        return lambda rng: generators.configuration(asked, rng)
    if isinstance(model, BlockModel) and groups is not None:
        within, between = generators.block_probabilities(groups, model.mean_degree, model.homophily)
        if oriented:
            return lambda rng: generators.undirected_unique(*generators.block_model(groups, within, between, rng, directed=True))
        return lambda rng: generators.block_model(groups, within, between, rng)
    return None


def _closure(low: np.ndarray, high: np.ndarray, n: int, seed: int) -> _Closure:
    """The mean local clustering coefficient and the transitivity of the graph over nodes ``0..n-1`` (``low``-``high``
    each undirected edge once), and how each was taken (see the module: nodes and wedges sampled past
    :data:`EXACT_CLUSTERING`, :data:`WEDGES_PER_NODE` and :data:`TRANSITIVITY_WEDGES`)."""
    from engine.network.generators import pair_ends

    degrees = np.bincount(np.concatenate([low, high]), minlength=n).astype(np.int64)
    rng = np.random.default_rng(seed)
    if n <= EXACT_CLUSTERING:
        nodes, notes = np.arange(n), []
    else:
        nodes = np.sort(rng.choice(n, EXACT_CLUSTERING, replace=False))
        notes = [f"the mean over a seeded sample of {EXACT_CLUSTERING:,} nodes"]
    ends, others = np.concatenate([low, high]), np.concatenate([high, low])
    neighbours = others[np.argsort(ends, kind="stable")]  # each node's neighbours, node by node
    starts = np.concatenate([[0], np.cumsum(degrees)])
    linked = np.sort(np.minimum(low, high).astype(np.int64) * n + np.maximum(low, high))
    all_wedges = degrees * (degrees - 1) // 2

    def closed(owner: np.ndarray, wedge: np.ndarray) -> np.ndarray:
        """Whether wedge number ``wedge`` of node ``owner`` (its pair of neighbours, :func:`pair_ends`) is linked."""
        if not len(linked):
            return np.zeros(len(owner), dtype=bool)
        first, second = pair_ends(wedge, degrees[owner])
        u, v = neighbours[starts[owner] + first], neighbours[starts[owner] + second]
        asked = np.minimum(u, v).astype(np.int64) * n + np.maximum(u, v)
        order = np.argsort(asked)  # sorted, the look-ups walk the edges in order: several times faster
        found = np.empty(len(asked), dtype=bool)
        found[order] = linked[np.minimum(np.searchsorted(linked, asked[order]), len(linked) - 1)] == asked[order]
        return found

    wedges = all_wedges[nodes]
    looked = np.minimum(wedges, WEDGES_PER_NODE)
    owner = np.repeat(np.arange(len(nodes)), looked)
    wedge = np.arange(len(owner)) - np.repeat(np.cumsum(looked) - looked, looked)  # 0, 1 ... within each node
    sampled = wedges[owner] > WEDGES_PER_NODE
    wedge[sampled] = np.floor(rng.random(int(sampled.sum())) * wedges[owner][sampled]).astype(np.int64)
    shut = np.bincount(owner, weights=closed(nodes[owner], wedge), minlength=len(nodes))
    with np.errstate(divide="ignore", invalid="ignore"):
        local = np.where(looked > 0, shut / looked, 0.0)
    if (wedges > WEDGES_PER_NODE).any():
        notes.append(f"a node of over {WEDGES_PER_NODE:,} neighbour pairs from a seeded sample of that many")
    clustering = float(local.mean()) if len(nodes) else 0.0

    total = int(all_wedges.sum())
    if total <= TRANSITIVITY_WEDGES:
        owner = np.repeat(np.arange(n), all_wedges)
        wedge = np.arange(total) - np.repeat(np.cumsum(all_wedges) - all_wedges, all_wedges)
        how = "exact"
    else:  # a uniform wedge: its node by its number of wedges, then one of that node's
        picks = np.sort(rng.integers(0, total, TRANSITIVITY_WEDGES))
        upto = np.cumsum(all_wedges)
        owner = np.searchsorted(upto, picks, side="right")
        wedge = picks - (upto[owner] - all_wedges[owner])
        how = f"from a seeded sample of {TRANSITIVITY_WEDGES:,} of its {total:,} wedges"
    transitivity = float(closed(owner, wedge).mean()) if total else 0.0
    return _Closure(clustering, "; ".join(notes) or "exact", transitivity, how, len(low) + len(owner) + int(looked.sum()))


def _coleman_rows(model: BlockModel, groups: np.ndarray, names: Sequence[str] | None, low: np.ndarray,
                  high: np.ndarray) -> list[FitRow]:
    """The pooled index of the groups, then Coleman's index of each group (the largest :data:`GROUP_ROWS`), each
    against the ties the block model expects."""
    from engine.network.generators import block_probabilities, pairs_inside

    n = len(groups)
    pairs, inside = pairs_inside(groups)
    s0 = inside / pairs if pairs else 0.0
    s = float((groups[low] == groups[high]).mean()) if len(low) else 0.0
    pooled = (s - s0) / (1 - s0) if s0 < 1 else 1.0
    sizes = np.bincount(groups).astype(float)
    shown = np.argsort(-sizes, kind="stable")[:GROUP_ROWS]
    more = f"; a row for each of the {GROUP_ROWS} largest of {len(sizes):,} groups" if len(sizes) > GROUP_ROWS else ""
    rows = [FitRow("coleman_index_pooled", model.homophily, pooled,
                   "(s - s0) / (1 - s0): s the share of edges inside groups, s0 of pairs (the spec's homophily)" + more)]
    same = groups[low] == groups[high]
    ends_inside = 2 * np.bincount(groups[low][same], minlength=len(sizes)).astype(float)
    ends = (np.bincount(groups[low], minlength=len(sizes)) + np.bincount(groups[high], minlength=len(sizes))).astype(float)
    within, between = block_probabilities(groups, model.mean_degree, model.homophily)
    expected_inside = within * sizes * (sizes - 1)
    expected_ends = expected_inside + between * sizes * (n - sizes)
    for group in shown:
        share = (sizes[group] - 1) / (n - 1) if n > 1 else 1.0
        name = names[group] if names is not None else str(group)
        rows.append(FitRow(f"coleman_index[{name}]", _coleman(expected_inside[group], expected_ends[group], share),
                           _coleman(ends_inside[group], ends[group], share),
                           f"Coleman's index: its members' ties inside it against {share:.4g} at random"))
    return rows


def _coleman(inside: float, ends: float, share: float) -> float | None:
    """Coleman's index of a group whose members have ``ends`` tie ends, ``inside`` of them to members, ``share`` of
    them expected with ties at random (None: no tie, or no one outside the group)."""
    if ends <= 0 or share >= 1:
        return None
    s = float(inside / ends)
    return float((s - share) / (1 - share) if s >= share else (s - share) / share)
