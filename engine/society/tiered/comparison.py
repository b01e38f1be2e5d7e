"""Cost against fidelity across a sweep's tier mixes: the ``tier_comparison`` dataset of a sweep over a ``tier_mix``.

A sweep whose grid varies a population's ``tier_mix`` (e.g. ``{llm: 1}``, ``{llm: 0.1, archetype: 0.9}``,
``{archetype: 1}``) runs the same scenario at each mix, ``replications`` times. When it ends, this module reads every
cell's ``token_telemetry`` and ``env_tool_calls`` and writes one row per mix to ``<root>/comparison/tier_comparison.parquet``
(the sweep's readers show it as the ``tier_comparison`` view):

- **cost per tick**: LLM calls, tokens (prompt + completion) and USD, each a mean over the mix's cells (a cell's own
  figure is its mean over ticks);
- **divergence from the all-LLM mix**: the outcome is the mix of actions the env carried out (its state-changing
  tools' successful calls, per tick). ``action_tvd`` is the total variation distance between a cell's action shares
  and those of the all-LLM cell of the same replication, averaged over the ticks where either cell acted (0: the same
  mix of actions, 1: disjoint; a tick where neither acted has no distance and is left out, a cell with no such tick
  none at all); ``action_rate_ratio`` is its actions per agent-step over the all-LLM cell's. For the all-LLM mix itself
  the figures are between each pair of its replications, averaged over the pairs: the seed noise a mix's distance is
  read against (it needs two replications or more).

Every figure comes with a 95% confidence interval over the replications (none with one replication). A mix's figures
are one value per replication, independent of each other: Student's t on R - 1 degrees of freedom
(:func:`replication_interval`). The all-LLM mix's are one value per pair of replications, and the R(R - 1)/2 pairs are
not independent (a replication takes part in R - 1 of them): their mean is a U-statistic, and its interval is the
jackknife over replications (leave one replication out, average the remaining pairs), with Student's t on R - 1
degrees of freedom (:func:`pairwise_interval`; it needs three replications). ``benchmarks/coverage_tiers.py`` measures
both intervals' coverage.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from statistics import mean, stdev
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from scipy.stats import t as student_t

from engine.env.registry import resolve_env_module
from engine.errors import SpecError
from engine.storage.reader import ReplayReader
from engine.storage.sweep_layout import TIER_COMPARISON_FILE, SweepManifest, read_sweep, read_sweep_manifest
from engine.tiers.spec import TIERS

__all__ = ["Interval", "compare_tiers", "mean_tick_distance", "mix_key", "mix_label", "pairwise_interval", "replication_interval",
           "state_changing_tools", "tvd", "write_tier_comparison"]

#: A figure and its 95% interval: (estimate, low, high); None where there is no value or too few to bound it.
Interval = tuple[float | None, float | None, float | None]

_FIGURES = ("calls_per_tick", "tokens_per_tick", "usd_per_tick", "action_tvd", "action_rate_ratio")
_DIVERGENCES = ("action_tvd", "action_rate_ratio")  #: the figures against the all-LLM cell: over pairs in its own row


def mix_key(params: Sequence[str]) -> str | None:
    """The grid path that varies a population's ``tier_mix`` (None: the sweep compares no mixes)."""
    return next((p for p in params if p.endswith(".tier_mix")), None)


def _shares(value: Any) -> dict[str, float]:
    mix = json.loads(value) if isinstance(value, str) else dict(value or {})
    return {tier: float(mix.get(tier, 0.0)) for tier in TIERS}


def mix_label(shares: Mapping[str, float]) -> str:
    """``llm 10% + archetype 90%``."""
    return " + ".join(f"{tier} {share:.0%}" for tier, share in shares.items() if share > 0)


def tvd(one: Mapping[str, float], two: Mapping[str, float]) -> float | None:
    """The total variation distance of two count vectors, each normalised to shares.

    Returns:
        The distance; 1 if one of them is empty and the other not; None if both are empty (a distance over no actions
        does not exist).
    """
    a, b = sum(one.values()), sum(two.values())
    if not a and not b:
        return None
    if not a or not b:
        return 1.0
    return 0.5 * sum(abs(one.get(k, 0) / a - two.get(k, 0) / b) for k in set(one) | set(two))


def mean_tick_distance(one: Sequence[Mapping[str, float]], two: Sequence[Mapping[str, float]]) -> float | None:
    """The mean over ticks of :func:`tvd` between two cells' action counts, tick by tick, over the ticks where either acted.

    Args:
        one: a cell's action counts per tick (tool name to count).
        two: the other cell's, for the same ticks in the same order.

    Returns:
        The mean distance; None when neither cell acted in any tick.
    """
    distances = [d for d in map(tvd, one, two) if d is not None]
    return mean(distances) if distances else None


def state_changing_tools(module_types: Iterable[str]) -> list[str]:
    """The tools of these env modules that change state (not ``readonly``): the actions the comparison counts."""
    found: set[str] = set()
    for name in module_types:
        try:
            found |= {tool for tool, info in resolve_env_module(name).tools().items() if not info.readonly}
        except SpecError:
            continue
    return sorted(found)


def replication_interval(values: Sequence[float]) -> Interval:
    """The mean of one value per replication and its 95% Student-t interval (R - 1 degrees of freedom).

    Args:
        values: one figure per replication, independent of each other.

    Returns:
        (mean, low, high); no interval with fewer than two values, nothing with none.
    """
    if not values:
        return None, None, None
    centre = mean(values)
    if len(values) < 2:
        return centre, None, None
    half = float(student_t.ppf(0.975, len(values) - 1)) * stdev(values) / math.sqrt(len(values))
    return centre, centre - half, centre + half


def pairwise_interval(values: Mapping[tuple[int, int], float]) -> Interval:
    """The mean of a figure over pairs of replications and its 95% interval, counting replications rather than pairs.

    The pairs share replications, so they are not independent observations: the mean is a U-statistic over the
    replications. Its variance is the jackknife's over replications: with theta_k the mean over the pairs without
    replication k, (R - 1)/R times the sum of (theta_k - mean theta)^2; the interval is Student's t on R - 1 degrees of
    freedom. The jackknife overstates a U-statistic's variance a little (Efron and Stein, 1981), so the interval errs
    wide at small R; ``benchmarks/coverage_tiers.py`` measures it.

    Args:
        values: the figure of each pair of replications present, keyed by the two replications (each pair once).

    Returns:
        (mean over the pairs, low, high); no interval unless every replication can be left out with a pair remaining
        (three replications or more), nothing without pairs.
    """
    if not values:
        return None, None, None
    centre = mean(values.values())
    replications = sorted({r for pair in values for r in pair})
    left_out = []
    for k in replications:
        rest = [v for pair, v in values.items() if k not in pair]
        if not rest:
            return centre, None, None
        left_out.append(mean(rest))
    n = len(replications)
    spread = sum((theta - mean(left_out)) ** 2 for theta in left_out)
    half = float(student_t.ppf(0.975, n - 1)) * math.sqrt((n - 1) / n * spread)
    return centre, centre - half, centre + half


def compare_tiers(manifest: SweepManifest, reader: ReplayReader, tools: Sequence[str]) -> list[dict[str, Any]]:
    """The ``tier_comparison`` rows (see the module docstring), one per mix in grid order; none without an all-LLM mix."""
    key = mix_key(manifest.params)
    if key is None:
        return []
    quoted = ", ".join("'" + t.replace("'", "''") + "'" for t in tools) or "NULL"
    costs = reader.query("SELECT cell, step, calls, prompt_tokens + completion_tokens AS tokens, cost_usd, members "
                         "FROM token_telemetry WHERE tier = 'total'").to_pylist()
    acts = reader.query(f"SELECT cell, step, tool, count(*) AS n FROM env_tool_calls WHERE ok AND tool IN ({quoted}) "
                        "GROUP BY ALL").to_pylist()
    per_cell: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in costs:
        per_cell[row["cell"]].append(row)
    actions: dict[tuple[int, int], dict[str, float]] = defaultdict(dict)
    for row in acts:
        actions[(row["cell"], row["step"])][row["tool"]] = float(row["n"])
    mixes = {c.index: _shares(c.params.get(key)) for c in manifest.cells}
    reference = {c.replication: c.index for c in manifest.cells if mixes[c.index]["llm"] == 1.0 and c.index in per_cell}
    if not reference:
        return []
    reps = sorted(reference)

    def divergence(cell: int, ref: int) -> tuple[float | None, float | None]:
        steps = sorted({r["step"] for r in per_cell[cell]} & {r["step"] for r in per_cell[ref]})
        members = {r["step"]: r["members"] for r in per_cell[cell]}
        ref_members = {r["step"]: r["members"] for r in per_cell[ref]}
        distance = mean_tick_distance([actions[(cell, s)] for s in steps], [actions[(ref, s)] for s in steps])
        rates = [sum(actions[(cell, s)].values()) / members[s] for s in steps if members[s]]
        ref_rates = [sum(actions[(ref, s)].values()) / ref_members[s] for s in steps if ref_members[s]]
        ratio = mean(rates) / mean(ref_rates) if rates and ref_rates and mean(ref_rates) else None
        return distance, ratio

    # a mix's figures: one value per replication; the divergences of the all-LLM mix: one per pair of replications
    figures: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    paired: dict[str, dict[tuple[int, int], float]] = defaultdict(dict)
    order: dict[str, dict[str, float]] = {}
    for cell in manifest.cells:
        rows = per_cell.get(cell.index)
        if not rows:
            continue
        label = mix_label(mixes[cell.index])
        order.setdefault(label, mixes[cell.index])
        found = figures[label]
        found["calls_per_tick"].append(mean(r["calls"] for r in rows))
        found["tokens_per_tick"].append(mean(r["tokens"] for r in rows))
        found["usd_per_tick"].append(mean(r["cost_usd"] or 0.0 for r in rows))
        if mixes[cell.index]["llm"] == 1.0:  # against each later replication: every pair once
            for r in reps:
                if r > cell.replication:
                    distance, ratio = divergence(cell.index, reference[r])
                    if distance is not None:
                        paired["action_tvd"][(cell.replication, r)] = distance
                    if ratio is not None:
                        paired["action_rate_ratio"][(cell.replication, r)] = ratio
        elif cell.replication in reference:
            distance, ratio = divergence(cell.index, reference[cell.replication])
            if distance is not None:
                found["action_tvd"].append(distance)
            if ratio is not None:
                found["action_rate_ratio"].append(ratio)
    result = []
    for label, shares in order.items():
        reference_row = shares["llm"] == 1.0
        line: dict[str, Any] = {"mix": label, **{f"{tier}_share": share for tier, share in shares.items()},
                               "replications": len(figures[label]["calls_per_tick"]), "reference": reference_row}
        for name in _FIGURES:
            found_interval = (pairwise_interval(paired[name]) if reference_row and name in _DIVERGENCES
                              else replication_interval(figures[label][name]))
            line[name], line[f"{name}_low"], line[f"{name}_high"] = found_interval
        result.append(line)
    return result


def write_tier_comparison(root: Path) -> int:
    """Write ``<root>/comparison/tier_comparison.parquet`` for a sweep over tier mixes; returns its rows (0: nothing to compare,
    and no file)."""
    manifest, doc = read_sweep_manifest(root), read_sweep(root)
    if manifest is None or doc is None or mix_key(manifest.params) is None:
        return 0
    found = doc.get("spec")
    spec: dict[str, Any] = found if isinstance(found, dict) else {}
    tools = state_changing_tools(m.get("type", "") for m in (spec.get("environment") or {}).get("modules", []))
    with ReplayReader(root) as reader:
        rows = compare_tiers(manifest, reader, tools)
    if not rows:
        return 0
    target = Path(root) / TIER_COMPARISON_FILE
    target.parent.mkdir(exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows), target)
    return len(rows)
