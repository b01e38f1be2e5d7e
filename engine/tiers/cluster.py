"""An archetype population's clusters: seeded k-means over its members' persona fields (numpy, no I/O).

**Features.** Each of the spec's fields is *numeric* when every present value (not missing, not None) is an int or
a float (a bool is not a number here), else *categorical*:

- numeric: scaled to mean 0 and sd 1 over the members; a missing (or NaN, infinite) value is the mean, a constant
  field is 0 for everyone;
- categorical: one-hot by the value's ``str`` (a missing value is the value ``None``), every column of the field
  multiplied by ``1 / sqrt(1 - sum(p_v^2))`` (``p_v``: the members' share with value ``v``), so that the block's
  columns together have variance 1 over the members, as a numeric field's one column has; a field with one value is
  0 for everyone. A field's :data:`MAX_VALUES` most common values (ties: the first seen) have a column each; rarer
  values share one.

So every field adds the same total variance, 1, whatever its kind and number of values: k-means, which lowers the
summed within-cluster variance, has no reason to prefer a field for its kind alone (with every column weighted
1/sqrt(2), as before issue 51, a balanced yes/no field added 0.25, and with k=2 an age field's 1 took the split).
The spec's ``weights`` multiply a field's variance: its block is scaled by ``sqrt(weight)`` (a weight of 2 counts
the field twice).

The one-hot columns are never built: a member's dot product with a centre's block of a categorical field is the
centre's entry for the member's value, a lookup.

**Fitting.** The centres are fitted on a seeded sample of at most ``sample`` members (all of them when there are
fewer), identical feature rows merged with their counts as weights: greedy k-means++ seeding, then Lloyd rounds until
no label changes or ``iterations`` rounds. ``k`` is ``count`` at most, and at most the sample's distinct feature rows.
Then every member is assigned to its nearest centre (squared euclidean distance, scored in float32), a chunk of rows
at a time, so the distances are never all members × all centres at once: 1,000,000 members × 1,000 clusters on 5
fields take about 10 s on 2 cores. Clusters no member is in are dropped, and the labels count from 0 in order of each
cluster's first member. The same profiles, spec and seed give the same labels.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.tiers.spec import ClusterSpec

__all__ = ["MAX_VALUES", "cluster_members", "cluster_traits"]

#: values of a categorical field with a one-hot column of their own; rarer ones share one
MAX_VALUES = 100
#: distances computed at once (rows × centres): 512 kB of float32, so a chunk stays in the cache
_CHUNK_CELLS = 1 << 17
_CHUNK_ROWS = (16, 20_000)  #: rows a chunk has, at least and at most
#: cells (combinations × centres) of a lookup table of every combination of categorical values, at most
_TABLE_CELLS = 1 << 22


@dataclass
class _Features:
    """Members' features: the scaled numeric columns, and each categorical field's value codes and one-hot scale."""

    numeric: np.ndarray  #: (members, numeric fields), float64
    codes: list[np.ndarray]  #: one per categorical field: (members,) int64, in [0, width)
    widths: list[int]  #: one-hot columns of each categorical field
    scales: np.ndarray  #: (categorical fields,): the entry of each field's one-hot column for a member with its value
    joint: np.ndarray | None = None  #: each member's combination of categorical values (an index of ``combos``)
    combos: np.ndarray | None = None  #: (combinations, categorical fields): the codes of each combination present

    def take(self, rows: np.ndarray) -> _Features:
        joint = self.joint[rows] if self.joint is not None else None
        return _Features(self.numeric[rows], [c[rows] for c in self.codes], self.widths, self.scales, joint, self.combos)

    def __len__(self) -> int:
        return int(self.numeric.shape[0])

    def with_combinations(self) -> _Features:
        """The features with their categorical values' combinations (when their one-hot columns' product fits an int64)."""
        if not self.codes or math.prod(self.widths) >= 2**62:
            return self
        radix = np.zeros(len(self), dtype=np.int64)
        for codes, width in zip(self.codes, self.widths, strict=True):
            radix = radix * width + codes
        _, first, joint = np.unique(radix, return_index=True, return_inverse=True)
        combos = np.column_stack([codes[first] for codes in self.codes])
        return _Features(self.numeric, self.codes, self.widths, self.scales, joint.reshape(-1).astype(np.int64), combos)

    @property
    def apart(self) -> np.ndarray:
        """(categorical fields,): the squared distance two different values of each field put between members."""
        return 2 * self.scales**2


@dataclass
class _Centres:
    """k centres in feature space: numeric coordinates and each categorical field's one-hot block (scaled)."""

    numeric: np.ndarray  #: (k, numeric fields)
    blocks: list[np.ndarray]  #: one per categorical field: (k, width)

    def squared_norms(self) -> np.ndarray:
        norms = np.einsum("ij,ij->i", self.numeric, self.numeric)
        for block in self.blocks:
            norms += np.einsum("ij,ij->i", block, block)
        return norms


def _is_numeric(values: Sequence[Any]) -> bool:
    """Every present value is a number (a field with none present is numeric: 0 for everyone)."""
    return all(kind is type(None) or (issubclass(kind, numbers.Real) and not issubclass(kind, bool | np.bool_))
               for kind in set(map(type, values)))


def _numbers(values: Sequence[Any]) -> np.ndarray:
    """The values as floats, NaN where missing or not finite."""
    column = np.array(values, dtype=np.float64)  # None is NaN
    column[~np.isfinite(column)] = np.nan
    return column


def _scaled(values: Sequence[Any]) -> np.ndarray:
    column = _numbers(values)
    present = ~np.isnan(column)
    if not present.any():
        return np.zeros(len(column))
    known = column[present]
    low, high = known.min(), known.max()
    if low == high:
        return np.zeros(len(column))
    mean, sd = known.mean(), known.std()
    column[~present] = mean
    return (column - mean) / sd


def _value_codes(values: Sequence[Any]) -> tuple[np.ndarray, list[Any]]:
    """Each value's code, by its ``str``, counted in order of first appearance; and each code's first value."""
    texts = list(map(str, values))
    index = {text: code for code, text in enumerate(dict.fromkeys(texts))}
    codes = np.fromiter(map(index.__getitem__, texts), dtype=np.int64, count=len(texts))
    _, first = np.unique(codes, return_index=True)
    return codes, [values[i] for i in first.tolist()]


def _capped(codes: np.ndarray, distinct: int) -> tuple[np.ndarray, int]:
    """The codes with only the :data:`MAX_VALUES` most common values kept apart, and the one-hot width."""
    if distinct <= MAX_VALUES:
        return codes, distinct
    counts = np.bincount(codes, minlength=distinct)
    kept = np.argsort(-counts, kind="stable")[:MAX_VALUES]
    remap = np.full(distinct, MAX_VALUES, dtype=np.int64)
    remap[kept] = np.arange(MAX_VALUES)
    return remap[codes], MAX_VALUES + 1


def _columns(profiles: Sequence[dict[str, Any]], fields: Sequence[str]) -> list[list[Any]]:
    return [[profile.get(name) for profile in profiles] for name in fields]


def _one_hot_scale(codes: np.ndarray, width: int) -> float:
    """The entry that gives a field's one-hot block total variance 1: its columns' variances ``p(1 - p)`` sum to
    ``1 - sum(p^2)``; 0 for a field with one value."""
    shares = np.bincount(codes, minlength=width) / len(codes)
    spread = 1 - float(np.square(shares).sum())
    return 1 / math.sqrt(spread) if spread > 1e-12 else 0.0


def _features(profiles: Sequence[dict[str, Any]], fields: Sequence[str],
              weights: dict[str, float] | None = None) -> _Features:
    """The members' features: each field's block of total variance ``weights[field]`` (default 1)."""
    numeric: list[np.ndarray] = []
    codes: list[np.ndarray] = []
    widths: list[int] = []
    scales: list[float] = []
    for name, values in zip(fields, _columns(profiles, fields), strict=True):
        weight = math.sqrt((weights or {}).get(name, 1.0))
        if _is_numeric(values):
            numeric.append(_scaled(values) * weight)
        else:
            found, firsts = _value_codes(values)
            capped, width = _capped(found, len(firsts))
            codes.append(capped)
            widths.append(width)
            scales.append(_one_hot_scale(capped, width) * weight)
    matrix = np.column_stack(numeric) if numeric else np.zeros((len(profiles), 0))
    return _Features(np.ascontiguousarray(matrix, dtype=np.float64), codes, widths, np.array(scales, dtype=np.float64))


def _distinct(features: _Features) -> tuple[_Features, np.ndarray]:
    """The distinct feature rows (in sorted order) and how many members each stands for."""
    table = np.column_stack([features.numeric, *[c.astype(np.float64) for c in features.codes]])
    _, first, counts = np.unique(table, axis=0, return_index=True, return_counts=True)
    return features.take(first), counts.astype(np.float64)


def _point_distances(features: _Features, points: np.ndarray) -> np.ndarray:
    """(points, rows): each row's squared distance to each of the rows ``points``, exactly 0 for a row equal to it."""
    apart = features.apart  # two different values of a categorical field: scale² + scale²
    distances = np.zeros((len(points), len(features)))
    if features.joint is not None and features.combos is not None and len(features.combos) <= len(features):
        combos = features.combos  # sum the fields whose values differ, per combination of values
        differ = (combos[features.joint[points]][:, None, :] != combos[None, :, :]) @ apart
        np.take(differ, features.joint, axis=1, out=distances)
    else:
        for codes, field_apart in zip(features.codes, apart, strict=True):
            distances += field_apart * (codes[None, :] != codes[points, None])
    gap = np.empty_like(distances)
    for column in features.numeric.T:
        column = np.ascontiguousarray(column)
        np.subtract(column[None, :], column[points, None], out=gap)
        distances += np.square(gap, out=gap)
    return distances


def _centres_at(features: _Features, rows: np.ndarray) -> _Centres:
    blocks = []
    for codes, width, scale in zip(features.codes, features.widths, features.scales, strict=True):
        block = np.zeros((len(rows), width))
        block[np.arange(len(rows)), codes[rows]] = scale
        blocks.append(block)
    return _Centres(features.numeric[rows].copy(), blocks)


def _draw(cumulative: np.ndarray, chance: np.ndarray, rng: np.random.Generator, size: int) -> np.ndarray:
    """``size`` rows drawn with probability by their share of ``cumulative`` (a running sum), never one with no chance."""
    picks = np.minimum(np.searchsorted(cumulative, rng.random(size) * cumulative[-1], side="right"), len(cumulative) - 1)
    for i, pick in enumerate(picks):
        while chance[pick] <= 0:  # only past the end by rounding: step back to a row with a chance
            pick -= 1
        picks[i] = pick
    return picks


def _seed_centres(features: _Features, weights: np.ndarray, k: int, rng: np.random.Generator) -> _Centres:
    """Greedy k-means++: the first centre a member drawn by weight; for each next one, 2 + ln k candidate rows drawn by
    weight × squared distance to their nearest centre so far (a row equal to a centre is never drawn again), and the
    one that leaves the least weighted sum of those distances kept."""
    tries = 2 + int(math.log(k))
    chosen = [int(_draw(np.cumsum(weights), weights, rng, 1)[0])]
    nearest = _point_distances(features, np.array(chosen))[0]
    for _ in range(1, k):
        chance = weights * nearest
        if not chance.any():  # every row is a centre already
            break
        candidates = _draw(np.cumsum(chance), chance, rng, tries)
        after = _point_distances(features, candidates)
        np.minimum(after, nearest, out=after)
        best = int(np.argmin(after @ weights))
        chosen.append(int(candidates[best]))
        nearest = after[best]
    return _centres_at(features, np.array(chosen))


def _nearest(features: _Features, centres: _Centres) -> np.ndarray:
    """Each row's nearest centre: argmin of ||c||² - 2 x·c (||x||² is the same for every centre), chunk by chunk.

    A chunk's scores start as a lookup of what its categorical values give (with ||c||²), one table per field or,
    when it is small enough, one for every combination of values present; each numeric field then adds its part.
    No BLAS call: a product over a few features is no faster there, and threads fight a busy machine's other work.
    """
    k = centres.numeric.shape[0]
    lookups = [-2 * scale * block.T for block, scale in zip(centres.blocks, features.scales, strict=True)]  # (width, k)
    if features.joint is not None and features.combos is not None and len(features.combos) * k <= _TABLE_CELLS:
        table = centres.squared_norms() + sum((lookup[features.combos[:, f]] for f, lookup in enumerate(lookups)),
                                               np.zeros((len(features.combos), k)))
        tables = [(features.joint, table)]
    elif lookups:
        tables = [(codes, lookup) for codes, lookup in zip(features.codes, lookups, strict=True)]
        tables[0] = (tables[0][0], tables[0][1] + centres.squared_norms())
    else:
        tables = [(np.zeros(len(features), dtype=np.int64), centres.squared_norms()[None, :])]
    tables = [(codes, np.ascontiguousarray(table, dtype=np.float32)) for codes, table in tables]
    weights = np.ascontiguousarray(-2 * centres.numeric.T, dtype=np.float32)  # (numeric fields, k)
    columns = np.ascontiguousarray(features.numeric.T, dtype=np.float32)  # (numeric fields, rows)
    labels = np.empty(len(features), dtype=np.int64)
    step = max(_CHUNK_ROWS[0], min(_CHUNK_ROWS[1], _CHUNK_CELLS // k))
    scores, part = np.empty((step, k), dtype=np.float32), np.empty((step, k), dtype=np.float32)
    for start in range(0, len(features), step):
        stop = min(start + step, len(features))
        rows = stop - start
        out, extra = scores[:rows], part[:rows]
        np.take(tables[0][1], tables[0][0][start:stop], axis=0, out=out)
        for codes, table in tables[1:]:
            np.take(table, codes[start:stop], axis=0, out=extra)
            out += extra
        for j in range(weights.shape[0]):
            np.multiply(columns[j, start:stop, None], weights[j], out=extra)
            out += extra
        labels[start:stop] = out.argmin(axis=1)
    return labels


def _means(features: _Features, weights: np.ndarray, labels: np.ndarray, old: _Centres) -> _Centres:
    """Each centre moved to its rows' weighted mean; a centre with no rows stays where it was."""
    k = old.numeric.shape[0]
    mass = np.bincount(labels, weights=weights, minlength=k)
    held = mass > 0
    numeric = old.numeric.copy()
    for j in range(numeric.shape[1]):
        sums = np.bincount(labels, weights=weights * features.numeric[:, j], minlength=k)
        numeric[held, j] = sums[held] / mass[held]
    blocks = []
    for codes, width, scale, block in zip(features.codes, features.widths, features.scales, old.blocks, strict=True):
        shares = np.bincount(labels * width + codes, weights=weights, minlength=k * width).reshape(k, width)
        moved = block.copy()
        moved[held] = scale * shares[held] / mass[held, None]
        blocks.append(moved)
    return _Centres(numeric, blocks)


def _fit(features: _Features, weights: np.ndarray, k: int, iterations: int, rng: np.random.Generator) -> _Centres:
    centres = _seed_centres(features, weights, k, rng)
    labels = _nearest(features, centres)
    for _ in range(iterations):
        centres = _means(features, weights, labels, centres)
        moved = _nearest(features, centres)
        if np.array_equal(moved, labels):
            break
        labels = moved
    return centres


def _in_order_of_first_member(labels: np.ndarray) -> np.ndarray:
    used, first = np.unique(labels, return_index=True)
    remap = np.zeros(int(labels.max()) + 1 if len(labels) else 0, dtype=np.int64)
    remap[used[np.argsort(first)]] = np.arange(len(used))
    return remap[labels]


def cluster_members(profiles: Sequence[dict[str, Any]], spec: ClusterSpec, seed: int) -> list[int]:
    """Each member's cluster (see the module docstring): labels from 0, in order of each cluster's first member.

    Args:
        profiles: the members' profiles, in member (id) order.
        spec: the fields and their weights, the number of clusters at most, the fitting sample and the Lloyd rounds.
        seed: seeds the sample and the k-means++ draws (a non-negative int).
    """
    if not profiles:
        return []
    rng = np.random.default_rng(seed)
    features = _features(profiles, spec.fields, spec.weights).with_combinations()
    if len(features) > spec.sample:
        fitted = features.take(np.sort(rng.choice(len(features), size=spec.sample, replace=False)))
    else:
        fitted = features
    distinct, weights = _distinct(fitted)
    centres = _fit(distinct, weights, min(spec.count, len(distinct)), spec.iterations, rng)
    return _in_order_of_first_member(_nearest(features, centres)).tolist()


def _readable(value: float) -> int | float:
    """``value`` to 3 significant digits, an int when it is a whole number (34.56 -> 34.6, 52345.6 -> 52300)."""
    if value == 0 or not math.isfinite(value):
        return 0 if value == 0 else value
    rounded = round(value, 2 - math.floor(math.log10(abs(value))))
    return int(rounded) if float(rounded).is_integer() else float(rounded)


def _numeric_traits(values: Sequence[Any], labels: np.ndarray, clusters: int) -> list[Any]:
    column = _numbers(values)
    present = ~np.isnan(column)
    counts = np.bincount(labels[present], minlength=clusters)
    sums = np.bincount(labels[present], weights=column[present], minlength=clusters)
    order = np.argsort(labels, kind="stable")
    starts = np.searchsorted(labels[order], np.arange(clusters))
    sorted_values = column[order]
    lows = np.minimum.reduceat(np.where(np.isnan(sorted_values), np.inf, sorted_values), starts)
    highs = np.maximum.reduceat(np.where(np.isnan(sorted_values), -np.inf, sorted_values), starts)
    whole = all(issubclass(kind, numbers.Integral) for kind in set(map(type, values)) if kind is not type(None))
    traits: list[Any] = []
    for n in range(clusters):
        if counts[n] == 0:
            traits.append("unknown")
            continue
        low, high = (int(lows[n]), int(highs[n])) if whole else (_readable(lows[n]), _readable(highs[n]))
        mean = _readable(sums[n] / counts[n])
        traits.append(low if lows[n] == highs[n] else f"{mean} on average ({low} to {high})")
    return traits


def _categorical_traits(values: Sequence[Any], labels: np.ndarray, clusters: int) -> list[Any]:
    codes, firsts = _value_codes(values)
    pairs, seen, counts = np.unique(labels * len(firsts) + codes, return_index=True, return_counts=True)
    owner, code = pairs // len(firsts), pairs % len(firsts)
    best = np.lexsort((seen, -counts, owner))  # per cluster: the most members, then the value its members had first
    top = best[np.r_[True, owner[best][1:] != owner[best][:-1]]]
    sizes = np.bincount(labels, minlength=clusters)
    traits: list[Any] = []
    for n, row in zip(owner[top].tolist(), top.tolist(), strict=True):
        value, share = firsts[int(code[row])], counts[row] / sizes[n]
        traits.append(value if share == 1 else f"{value} ({min(99, max(1, round(100 * share)))}%)")
    return traits


def cluster_traits(profiles: Sequence[dict[str, Any]], labels: Sequence[int], fields: Sequence[str]) -> list[dict[str, Any]]:
    """Each cluster's representative traits, by label (labels from 0, each used): ``{"cluster": n, field: ...}``.

    A numeric field gives its members' mean to 3 significant digits and their range (``"34.6 on average (21 to
    48)"``), or the value when they all share it; a categorical field gives its most common value with its share
    (``"female (62%)"``; a tie goes to the value the cluster's members had first), or the value when they all share it.
    """
    found = np.asarray(labels, dtype=np.int64)
    clusters = int(found.max()) + 1 if len(found) else 0
    traits: list[dict[str, Any]] = [{"cluster": n} for n in range(clusters)]
    for name, values in zip(fields, _columns(profiles, fields), strict=True):
        kind = _numeric_traits if _is_numeric(values) else _categorical_traits
        for n, trait in enumerate(kind(values, found, clusters)):
            traits[n][name] = trait
    return traits
