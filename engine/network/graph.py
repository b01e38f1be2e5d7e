"""A directed graph as compressed sparse rows (the layer as read or generated) plus the changes made since.

The base graph is two numpy arrays, ``indptr`` and ``indices`` (neighbour ids, ascending in each row), over
the sorted node ids: 10,000,000 edges take about 80 MB and build in a second or two. What changes during a run
(follows, unfollows, an intervention's removals) goes to a small overlay of added and removed edges, so the
state an env module saves each tick is the overlay, not the graph: the base is rebuilt from the spec.
Reverse rows (who links to a node) are built on first use.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

__all__ = ["Graph"]

_EMPTY = np.empty(0, dtype=np.int64)
_INT32 = np.iinfo(np.int32)


class _Rows:
    """Compressed sparse rows over ``nodes`` (sorted ids): row ``i`` is ``indices[indptr[i]:indptr[i + 1]]``."""

    __slots__ = ("indices", "indptr", "nodes")

    def __init__(self, nodes: np.ndarray, source: np.ndarray, target: np.ndarray) -> None:
        source, target = source.astype(np.int64, copy=False), target.astype(np.int64, copy=False)
        first, low = (int(source.min()), int(target.min())) if len(target) else (0, 0)
        span = int(target.max()) - low + 1 if len(target) else 1
        if len(target) and (int(source.max()) - first + 1) * span < 2**63:
            # sort by (source, target) as one int64 key: a 1-D sort, several times faster than lexsort
            keys = np.sort((source - first) * span + (target - low))
            source, target = keys // span + first, keys % span + low
        elif len(target):  # ids too far apart for one key
            order = np.lexsort((target, source))
            source, target = source[order], target[order]
        # ids below 2**31 (any society that fits a machine) as int32: half the memory, and half the bytes to the env actor
        small = not len(target) or (int(target.min()) >= _INT32.min and int(target.max()) <= _INT32.max)
        self.indices = target.astype(np.int32 if small else np.int64)
        position = np.searchsorted(nodes, source)  # sorted: a pass that stays in cache
        self.nodes = nodes
        self.indptr = np.zeros(len(nodes) + 1, dtype=np.int64)
        np.cumsum(np.bincount(position, minlength=len(nodes)), out=self.indptr[1:])

    def row(self, node: int) -> np.ndarray:
        i = int(np.searchsorted(self.nodes, node))
        if i == len(self.nodes) or self.nodes[i] != node:
            return _EMPTY
        return self.indices[self.indptr[i] : self.indptr[i + 1]]

    def has(self, node: int, other: int) -> bool:
        row = self.row(node)
        j = int(np.searchsorted(row, other))
        return j < len(row) and int(row[j]) == other


class Graph:
    """A directed graph over integer node ids: the base as CSR arrays, and the edges added and removed since.

    Args:
        source: the base edges' sources.
        target: their targets (an undirected layer gives each edge both ways).
        nodes: every node id, edges or not (default: the ids the edges name).
        layer: the network layer it is (None: a graph given inline); an env module that changes it records the
            changes under this name.
    """

    def __init__(self, source: np.ndarray, target: np.ndarray, nodes: Iterable[int] | np.ndarray | None = None, *,
                 layer: str | None = None) -> None:
        self.layer = layer
        source, target = np.asarray(source, dtype=np.int64), np.asarray(target, dtype=np.int64)
        if nodes is None:
            ids = np.concatenate([source, target])
        else:
            ids = nodes.astype(np.int64) if isinstance(nodes, np.ndarray) else np.fromiter(nodes, np.int64)
        self._nodes = np.unique(ids) if len(ids) else _EMPTY
        self._out = _Rows(self._nodes, source, target)
        self._in: _Rows | None = None
        self._base_edges = len(source)
        self._added: dict[int, set[int]] = {}
        self._removed: dict[int, set[int]] = {}
        self._added_in: dict[int, set[int]] = {}
        self._removed_in: dict[int, set[int]] = {}

    @classmethod
    def from_adjacency(cls, adjacency: Mapping[int, Iterable[int]], nodes: Iterable[int] | None = None, *,
                       layer: str | None = None) -> Graph:
        """A graph from node -> the nodes it links to (self-loops and repeats dropped)."""
        pairs = sorted({(int(u), int(v)) for u, vs in adjacency.items() for v in vs if int(v) != int(u)})
        source = np.array([u for u, _ in pairs], dtype=np.int64)
        target = np.array([v for _, v in pairs], dtype=np.int64)
        known = {int(u) for u in adjacency} | {v for _, v in pairs} | {int(n) for n in (nodes or ())}
        return cls(source, target, np.array(sorted(known), dtype=np.int64), layer=layer)

    # ---- reading -----------------------------------------------------------------------------
    def successors(self, node: int) -> list[int]:
        """The nodes ``node`` links to, ascending."""
        return self._merged(self._out.row(node), self._added.get(node), self._removed.get(node))

    def predecessors(self, node: int) -> list[int]:
        """The nodes that link to ``node``, ascending."""
        return self._merged(self._reverse().row(node), self._added_in.get(node), self._removed_in.get(node))

    def has_edge(self, source: int, target: int) -> bool:
        if target in self._added.get(source, ()):
            return True
        return target not in self._removed.get(source, ()) and self._out.has(source, target)

    def out_degree(self, node: int) -> int:
        return len(self._out.row(node)) + len(self._added.get(node, ())) - len(self._removed.get(node, ()))

    def nbytes(self) -> int:
        """Bytes of the CSR arrays built so far (the reverse rows once a query needed them)."""
        rows = [self._out] + ([self._in] if self._in is not None else [])
        return self._nodes.nbytes + sum(r.indices.nbytes + r.indptr.nbytes for r in rows)

    @property
    def edge_count(self) -> int:
        return self._base_edges + sum(map(len, self._added.values())) - sum(map(len, self._removed.values()))

    @property
    def nodes(self) -> np.ndarray:
        """The node ids the graph was built over, ascending (read-only)."""
        return self._nodes

    def degrees(self) -> tuple[np.ndarray, np.ndarray]:
        """Out- and in-degree of every node of :attr:`nodes`, changes included."""
        out = np.diff(self._out.indptr).copy()
        into = np.diff(self._reverse().indptr).copy()
        for delta, by_source, by_target in ((1, self._added, self._added_in), (-1, self._removed, self._removed_in)):
            for node, targets in by_source.items():
                out[np.searchsorted(self._nodes, node)] += delta * len(targets)
            for node, sources in by_target.items():
                into[np.searchsorted(self._nodes, node)] += delta * len(sources)
        return out, into

    def edges(self) -> tuple[np.ndarray, np.ndarray]:
        """Every edge now, as (source, target) arrays sorted by source then target."""
        counts = np.diff(self._out.indptr)
        source, target = np.repeat(self._nodes, counts), self._out.indices.astype(np.int64)
        if self._removed:
            gone = {(u, v) for u, vs in self._removed.items() for v in vs}
            keep = np.fromiter(((int(u), int(v)) not in gone for u, v in zip(source, target, strict=True)), bool, len(source))
            source, target = source[keep], target[keep]
        if self._added:
            new = sorted((u, v) for u, vs in self._added.items() for v in vs)
            source = np.concatenate([source, np.array([u for u, _ in new], dtype=np.int64)])
            target = np.concatenate([target, np.array([v for _, v in new], dtype=np.int64)])
            order = np.lexsort((target, source))
            source, target = source[order], target[order]
        return source, target

    # ---- changing ----------------------------------------------------------------------------
    def add_edge(self, source: int, target: int) -> bool:
        """Add ``source -> target``; whether the graph changed."""
        if self.has_edge(source, target):
            return False
        if target in self._removed.get(source, ()):
            _discard(self._removed, source, target)
            _discard(self._removed_in, target, source)
        else:
            self._added.setdefault(source, set()).add(target)
            self._added_in.setdefault(target, set()).add(source)
        return True

    def remove_edge(self, source: int, target: int) -> bool:
        """Remove ``source -> target``; whether the graph changed."""
        if not self.has_edge(source, target):
            return False
        if target in self._added.get(source, ()):
            _discard(self._added, source, target)
            _discard(self._added_in, target, source)
        else:
            self._removed.setdefault(source, set()).add(target)
            self._removed_in.setdefault(target, set()).add(source)
        return True

    @property
    def changed(self) -> bool:
        """Whether any edge was added or removed since the base."""
        return bool(self._added or self._removed)

    def changes(self) -> dict[str, list[list[int]]]:
        """The edges added and removed since the base, as sorted ``[source, target]`` pairs (JSON-ready)."""
        return {kind: sorted([u, v] for u, vs in by.items() for v in vs)
                for kind, by in (("added", self._added), ("removed", self._removed))}

    def with_changes(self, changes: Mapping[str, Iterable[Iterable[int]]]) -> Graph:
        """This graph's base with ``changes`` (as :meth:`changes` gives them) applied, and no other."""
        graph = Graph.__new__(Graph)
        graph.layer = self.layer
        graph._nodes, graph._out, graph._in, graph._base_edges = self._nodes, self._out, self._in, self._base_edges
        graph._added, graph._removed, graph._added_in, graph._removed_in = {}, {}, {}, {}
        for u, v in changes.get("removed", ()):
            graph.remove_edge(int(u), int(v))
        for u, v in changes.get("added", ()):
            graph.add_edge(int(u), int(v))
        return graph

    # ---- internals ---------------------------------------------------------------------------
    def _reverse(self) -> _Rows:
        if self._in is None:
            counts = np.diff(self._out.indptr)
            self._in = _Rows(self._nodes, self._out.indices, np.repeat(self._nodes, counts))
        return self._in

    @staticmethod
    def _merged(base: np.ndarray, added: set[int] | None, removed: set[int] | None) -> list[int]:
        row: list[int] = base.tolist()
        if removed:
            row = [v for v in row if v not in removed]
        if added:
            row = sorted([*row, *added])
        return row


def _discard(by: dict[int, set[int]], key: int, value: int) -> None:
    values = by.get(key)
    if values is not None:
        values.discard(value)
        if not values:
            del by[key]
