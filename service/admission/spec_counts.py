"""How big a submitted spec is, counted on the decoded body before ``ExperimentSpec`` validation.

Validating a spec expands its populations, so counting must come first and read only the raw
data: agents (the explicit list plus every population's ``count``, or the rows of its table when
it gives none), ticks (every ``run`` step's
``num_steps``) and sweep cells (the grid's combinations times ``replications``). A sweep may vary
the counted fields themselves (``population.0.count``, ``steps.0.num_steps``, whole ``population``
or ``steps`` lists); each such value is counted too, so the largest cell and the sweep's total
agent-steps are exact. Values are read the way pydantic's lax mode would accept them (numeric
strings, integral floats), rounding up, so a count is never lower than what validation accepts.
Malformed data counts as zero: validation refuses it without expanding anything.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

__all__ = ["SpecCounts", "count_spec"]

_INTEGER = re.compile(r"\s*[+-]?\d[\d_]*\s*")
_HUGE = 10**18  # what a number too long to parse counts as: more than any quota


@dataclass(frozen=True)
class SpecCounts:
    """The size of one spec as submitted."""

    agents: int  #: agents of the largest run (the spec itself, or its largest sweep cell)
    agent_steps: int  #: agents x ticks, summed over the sweep's cells (the spec's own without a sweep)
    cells: int = 1  #: runs the spec makes: 1 without a sweep
    explicit_agents: int = 0  #: the length of the spec's own ``agents`` list
    populations: tuple[int, ...] = ()  #: the spec's own ``population[i]`` sizes (its ``count``, or its table's rows)
    largest_cell_key: str | None = None  #: the grid key that makes a cell larger than the spec, if one does

    def agents_path(self, limit: int) -> str:
        """The field that takes the agent count past ``limit``: ``agents``, ``population.2.count`` or ``sweep.grid.<key>``."""
        if self.largest_cell_key is not None:
            return f"sweep.grid.{self.largest_cell_key}"
        total = self.explicit_agents
        if total > limit or not self.populations:
            return "agents"
        for index, count in enumerate(self.populations):
            total += count
            if total > limit:
                return f"population.{index}.count"
        return "population"


def _as_int(value: Any) -> int:
    if isinstance(value, bool | int):
        return int(value)
    if isinstance(value, float):
        return math.ceil(value) if math.isfinite(value) else 0
    if isinstance(value, str):
        if _INTEGER.fullmatch(value):
            digits = value.strip().replace("_", "")
            return _HUGE if len(digits) > 18 else int(digits)
        try:
            number = float(value)
        except ValueError:
            return 0
        return min(math.ceil(number), _HUGE) if math.isfinite(number) else 0
    return 0


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _count(population: Any) -> int:
    if not isinstance(population, Mapping):
        return 0
    rows = population.get("rows")
    if population.get("count") is None and isinstance(rows, list):  # a table without a count: every row
        return len(rows)
    return max(_as_int(population.get("count")), 0)


def _ticks(step: Any) -> int:
    if isinstance(step, Mapping) and step.get("type", "run") == "run":
        return max(_as_int(step.get("num_steps")), 0)
    return 0


def _indices(segment: str, length: int) -> list[int]:
    if segment == "*":
        return list(range(length))
    return [int(segment)] if segment.isdigit() and int(segment) < length else []


def _delta(segments: Sequence[str], value: Any, base: list[int], of_item: Any) -> int:
    """How much a grid value changes the sum of ``base`` (per-item counts of a list field)."""
    if len(segments) == 1:
        return sum(of_item(item) for item in _list(value)) - sum(base)
    targets = _indices(segments[1], len(base))
    if len(segments) == 2:
        return sum(of_item(value) - base[t] for t in targets)
    field = "count" if of_item is _count else "num_steps"
    if len(segments) == 3 and segments[2] == field:
        return sum(max(_as_int(value), 0) - base[t] for t in targets)
    return 0


def count_spec(data: Any, max_cells: int) -> SpecCounts:
    """Count a decoded spec's agents, agent-steps and cells without validating it.

    Args:
        data: the decoded request body (anything; a non-mapping counts as empty).
        max_cells: the most sweep cells worth enumerating; a larger sweep is counted by its cell
            number only (``agent_steps`` then assumes every cell is the spec itself).

    Returns:
        The counts, each at least what validation of the same data would accept.
    """
    if not isinstance(data, Mapping):
        return SpecCounts(0, 0)
    n_explicit = len(_list(data.get("agents")))
    pop_counts = [_count(p) for p in _list(data.get("population"))]
    step_ticks = [_ticks(s) for s in _list(data.get("steps"))]
    agents, ticks = n_explicit + sum(pop_counts), sum(step_ticks)
    own = SpecCounts(agents, agents * ticks, explicit_agents=n_explicit, populations=tuple(pop_counts))
    sweep = data.get("sweep")
    if not isinstance(sweep, Mapping):
        return own
    grid = sweep.get("grid", {})  # replications alone make a sweep too
    if not isinstance(grid, Mapping):
        return own
    replications = max(_as_int(sweep.get("replications", 1)), 1)
    sizes = [len(values) if isinstance(values, list) and values else 1 for values in grid.values()]
    cells = replications * math.prod(sizes)
    if cells > max_cells:
        return replace(own, agent_steps=agents * ticks * cells, cells=cells)
    # Each key that changes a count: its (agent delta, tick delta) per value.
    effects: list[tuple[str, list[tuple[int, int]]]] = []
    for key, values in grid.items():
        segments = str(key).split(".")
        per_value = []
        for value in values if isinstance(values, list) else []:
            if segments[0] == "agents" and len(segments) == 1:
                per_value.append((len(_list(value)) - n_explicit, 0))
            elif segments[0] == "population":
                per_value.append((_delta(segments, value, pop_counts, _count), 0))
            elif segments[0] == "steps":
                per_value.append((0, _delta(segments, value, step_ticks, _ticks)))
        if any(effect != (0, 0) for effect in per_value):
            effects.append((str(key), per_value))
    largest, largest_key, total = agents, None, 0
    for combo in itertools.product(*(per_value for _, per_value in effects)):
        cell_agents = max(agents + sum(a for a, _ in combo), 0)
        total += cell_agents * max(ticks + sum(t for _, t in combo), 0)
        if cell_agents > largest:
            changed = [key for (key, _), (a, _) in zip(effects, combo, strict=True) if a]
            largest, largest_key = cell_agents, changed[0]
    combos = math.prod(len(per_value) for _, per_value in effects)
    return replace(own, agents=largest, agent_steps=total * (cells // combos), cells=cells, largest_cell_key=largest_key)
