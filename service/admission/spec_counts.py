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

Edges are those the network's generated layers expect over the largest run's agents
(``engine.network.spec.expected_edges``; a layer read from a file is bounded by its file). A sweep may vary the
network (a layer's ``generate``, one of its parameters, a whole layer or network); every combination of such
values is counted, and the largest taken: edges grow with the agents, so the largest cell has the most.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine.api import count_expected_edges

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
    edges: int = 0  #: edges the generated network layers of the largest run expect, all layers together
    #: each generated layer's expected edges in that run, in the spec's order: (layer name, edges)
    layer_edges: tuple[tuple[str, int], ...] = ()
    edges_key: str | None = None  #: the grid key whose value makes a cell expect more edges than the spec, if one does

    def edges_path(self, limit: int) -> str:
        """The field that takes the edges past ``limit``: a layer's ``network.layers.<name>.generate``, or ``sweep.grid.<key>``."""
        if self.edges_key is not None:
            return f"sweep.grid.{self.edges_key}"
        total = 0
        for name, edges in self.layer_edges:
            total += edges
            if total > limit:
                return f"network.layers.{name}.generate"
        return "network"

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


def _layer_edges(network: Any, agents: int, seen: dict[tuple[str, str], int]) -> tuple[tuple[str, int], ...]:
    """Each generated layer's expected edges over ``agents`` agents (``seen``: those already counted, by layer and value)."""
    layers = network.get("layers") if isinstance(network, Mapping) else None
    if not isinstance(layers, Mapping):
        return ()
    counted = []
    for name, layer in layers.items():
        generate = layer.get("generate") if isinstance(layer, Mapping) else None
        if generate is None:
            continue
        known = (str(name), repr(generate))
        if known not in seen:
            seen[known] = count_expected_edges(generate, agents)
        counted.append((str(name), seen[known]))
    return tuple(counted)


def _patched(node: Any, segments: Sequence[str], value: Any) -> Any:
    """``node`` with the value at the dotted path ``segments`` replaced by ``value`` (a copy)."""
    if not segments:
        return value
    patched = dict(node) if isinstance(node, Mapping) else {}
    patched[segments[0]] = _patched(patched.get(segments[0]), segments[1:], value)
    return patched


def _count_edges(data: Mapping[str, Any], grid: Mapping[str, Any], counts: SpecCounts) -> SpecCounts:
    """``counts`` with the edges of the largest run: the spec's network, or the largest a combination of its grid's
    network values makes (a grid past the cells counted is not enumerated: it is refused anyway)."""
    seen: dict[tuple[str, str], int] = {}
    network = data.get("network")

    def total(patched: Any) -> tuple[int, tuple[tuple[str, int], ...]]:
        layers = _layer_edges(patched, counts.agents, seen)
        return sum(edges for _, edges in layers), layers

    edges, layers = total(network)
    largest = replace(counts, edges=edges, layer_edges=layers)
    varied = [(str(key).split(".")[1:], str(key), values) for key, values in grid.items()
              if str(key).split(".")[0] == "network" and isinstance(values, list) and values]
    for combo in itertools.product(*(values for _, _, values in varied)) if varied else ():
        patched = network
        for (segments, _, _), value in zip(varied, combo, strict=True):
            patched = _patched(patched, segments, value)
        edges, layers = total(patched)
        if edges > largest.edges:
            # The first key whose value alone adds edges to the spec's network names the field.
            key = next((key for (segments, key, _), value in zip(varied, combo, strict=True)
                        if total(_patched(network, segments, value))[0] > largest.edges), varied[0][1])
            largest = replace(counts, edges=edges, layer_edges=layers, edges_key=key)
    return largest


def count_spec(data: Any, max_cells: int) -> SpecCounts:
    """Count a decoded spec's agents, agent-steps, cells and expected edges without validating it.

    Args:
        data: the decoded request body (anything; a non-mapping counts as empty).
        max_cells: the most sweep cells worth enumerating; a larger sweep is counted by its cell
            number only (``agent_steps`` then assumes every cell is the spec itself).

    Returns:
        The counts, each at least what validation of the same data would accept.
    """
    if not isinstance(data, Mapping):
        return SpecCounts(0, 0)
    counts = _count_agents(data, max_cells)
    sweep = data.get("sweep")
    grid = sweep.get("grid") if isinstance(sweep, Mapping) else None
    enumerated = isinstance(grid, Mapping) and counts.cells <= max_cells
    return _count_edges(data, grid if enumerated and isinstance(grid, Mapping) else {}, counts)


def _count_agents(data: Mapping[str, Any], max_cells: int) -> SpecCounts:
    """:func:`count_spec`'s agents, agent-steps and cells."""
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
