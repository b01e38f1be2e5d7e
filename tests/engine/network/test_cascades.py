"""A cascade's measures against trees worked by hand."""

from __future__ import annotations

import pytest

from engine.network.cascades import CascadeStats, cascade_stats


@pytest.mark.parametrize(("children", "expected"), [
    ({}, CascadeStats(1, 0, 1, None)),
    ({1: [2]}, CascadeStats(2, 1, 1, 1.0)),
    # a star of 4: 3 pairs one apart, 3 pairs two apart -> 9 / 6
    ({1: [2, 3, 4]}, CascadeStats(4, 1, 3, 1.5)),
    # a chain of 4: distances 1, 2, 3, 1, 2, 1 -> 10 / 6
    ({1: [2], 2: [3], 3: [4]}, CascadeStats(4, 3, 1, 10 / 6)),
    # 1 -> 2, 3; 2 -> 4, 5: depth 2, breadth 2; Wiener index 3*2 + 1*4 + 1*4 + 1*4 = 18 over 10 pairs
    ({1: [2, 3], 2: [4, 5]}, CascadeStats(5, 2, 2, 1.8)),
])
def test_cascade_measures(children: dict[int, list[int]], expected: CascadeStats) -> None:
    got = cascade_stats(1, children)
    assert (got.size, got.depth, got.max_breadth) == (expected.size, expected.depth, expected.max_breadth)
    assert got.structural_virality == (None if expected.structural_virality is None else pytest.approx(expected.structural_virality))


def test_only_the_roots_tree_counts() -> None:
    assert cascade_stats(2, {1: [2, 3], 2: [4]}).size == 2
