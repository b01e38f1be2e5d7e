"""Reshare cascades: the measures of one reshare tree (size, depth, max breadth, structural virality).

A cascade is a post and every repost that reached someone through it: each repost's parent is the post it was
reposted from. Structural virality is Goel et al.'s mean distance between all pairs of the tree's nodes,
computed from subtree sizes (the Wiener index: every edge is on the path of ``s * (n - s)`` pairs) in linear
time. This module is pure: no I/O, no numpy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

__all__ = ["CascadeStats", "cascade_stats"]


@dataclass(frozen=True)
class CascadeStats:
    """One cascade's measures."""

    size: int  #: posts in the tree, the root included
    depth: int  #: the longest path from the root, in reposts
    max_breadth: int  #: the most posts at any one depth
    structural_virality: float | None  #: mean distance between pairs of posts (None for a lone post)


def cascade_stats(root: int, children: Mapping[int, Sequence[int]]) -> CascadeStats:
    """The measures of the tree under ``root``, its edges given as parent -> children."""
    order, depth_of, parent_of = [root], {root: 0}, {root: root}
    for node in order:  # breadth first: ``order`` grows as it is walked
        for child in children.get(node, ()):
            depth_of[child], parent_of[child] = depth_of[node] + 1, node
            order.append(child)
    n = len(order)
    breadth: dict[int, int] = {}
    for depth in depth_of.values():
        breadth[depth] = breadth.get(depth, 0) + 1
    subtree = dict.fromkeys(order, 1)
    wiener = 0
    for node in reversed(order[1:]):
        subtree[parent_of[node]] += subtree[node]
        wiener += subtree[node] * (n - subtree[node])
    virality = 2 * wiener / (n * (n - 1)) if n > 1 else None
    return CascadeStats(size=n, depth=max(depth_of.values()), max_breadth=max(breadth.values()), structural_virality=virality)
