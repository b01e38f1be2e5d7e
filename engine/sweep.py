"""Parameter sweeps: a spec's grid expanded into cells, each an ordinary run in its own directory.

Expansion (:func:`expand_sweep`) is sans-IO: the cartesian product of the grid's values, each
combination repeated ``replications`` times, in a stable order (the first grid key varies slowest,
the replication fastest). Every cell gets a seed derived by hashing (spec seed, params,
replication), so rerunning a sweep reproduces each cell. Running them is
:mod:`engine.society.run.sweep`; the layout (``cells/cell=0003``) is
:mod:`engine.storage.sweep_layout`, which the reader also uses.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from engine.errors import SpecError
from engine.grid_keys import Segment, check_grid_keys, field_named
from engine.spec import ExperimentSpec, parse_spec
from engine.storage.sweep_layout import cell_dir

__all__ = ["MAX_CELLS", "MAX_VALUE_SHAPES", "SweepCell", "check_sweep_values", "derive_seed", "describe_params", "expand_sweep"]

#: The most cells one sweep may expand to.
MAX_CELLS = 10_000
_SEED_BITS = 31  # every consumer takes a seed this size (numpy wants < 2**32, some providers int32)


@dataclass(frozen=True)
class SweepCell:
    """One cell of a sweep: a parameter combination and replication, ready to run."""

    index: int  #: position in the sweep, 0-based; the ``cell`` column of the sweep's datasets
    cell_id: str  #: ``cell-0003``
    params: dict[str, Any]  #: grid path -> value
    replication: int  #: 0-based
    seed: int  #: derived from (spec seed, params, replication); the cell spec's ``seed``
    spec: ExperimentSpec  #: the base spec with params applied, seed set, name suffixed, no sweep

    def run_dir(self, root: Path) -> Path:
        """Return this cell's run directory under the sweep root."""
        return cell_dir(root, self.index)


def derive_seed(base_seed: int, params: Mapping[str, Any], replication: int, salt: int = 0) -> int:
    """Return a cell's seed: a hash of (base seed, params, replication), in ``[0, 2**31)``.

    ``salt`` moves past a collision with an earlier cell's seed.
    """
    payload = json.dumps({"seed": base_seed, "params": dict(params), "replication": replication, "salt": salt},
                         sort_keys=True, default=str, separators=(",", ":"))
    return int.from_bytes(hashlib.sha256(payload.encode()).digest()[:8], "big") >> (64 - _SEED_BITS)


def _with_value(data: Any, path: tuple[Segment, ...], value: Any) -> Any:
    """``data`` with ``value`` (a copy) at ``path``: only the containers along the path are copied, the rest is shared
    (a copy of the whole base per cell cost seconds with a large population table)."""
    if not path:
        return copy.deepcopy(value)
    head, rest = path[0], path[1:]
    if isinstance(data, list):
        assert isinstance(head, int)
        return [*data[:head], _with_value(data[head], rest, value), *data[head + 1 :]]
    return {**data, head: _with_value(data.get(head) if rest else None, rest, value)}


def expand_sweep(spec: ExperimentSpec) -> list[SweepCell]:
    """Expand a spec's sweep into its cells, each with a validated spec.

    Args:
        spec: a spec with a ``sweep``.

    Returns:
        ``len(product of grid values) * replications`` cells, index order.

    Raises:
        SpecError: no sweep, too many cells, a key that does not resolve (path ``sweep``), or a
            value that makes an invalid spec (the message names the cell and its params).
    """
    if spec.sweep is None:
        raise SpecError("the spec declares no sweep", path="sweep")
    grid, replications = spec.sweep.grid, spec.sweep.replications
    total = replications * math.prod(len(values) for values in grid.values())
    if total > MAX_CELLS:
        raise SpecError(f"the sweep expands to {total} cells; at most {MAX_CELLS} are allowed", path="sweep")
    targets = _targets(spec)
    base = spec.model_dump(mode="json", exclude={"sweep"})
    cells: list[SweepCell] = []
    seeds: set[int] = set()
    for combo in itertools.product(*grid.values()):
        params = dict(zip(grid, combo, strict=True))
        for replication in range(replications):
            index = len(cells)
            cell_id = f"cell-{index:04d}"
            salt = 0
            while (seed := derive_seed(spec.seed, params, replication, salt)) in seeds:
                salt += 1
            seeds.add(seed)
            suffix = f"-{cell_id}"
            data = {**_with_params(base, targets, params), "seed": seed, "name": spec.name[: 200 - len(suffix)] + suffix}
            cells.append(SweepCell(index, cell_id, params, replication, seed, _parse_cell(data, cell_id, params)))
    return cells


#: The most kinds of value (:func:`_shape`) one grid key may take: each kind costs a parse of the whole spec at submit.
MAX_VALUE_SHAPES = 32


def check_sweep_values(spec: ExperimentSpec, check_cell: Callable[[ExperimentSpec], None] | None = None) -> None:
    """Check each value of each grid key, with the other keys as the spec has them: what a submitted sweep is checked
    with, so that no cell's value is found invalid only when that cell's turn comes.

    Its cost grows with the number of values, not with values times the spec's size: every value is validated by the
    part of the spec it sets (the nearest model holding the key's field, e.g. one agent's config), and the whole spec is
    parsed once for each kind of value a key takes (its JSON shape) and for a numeric key's least and greatest value,
    which finds the rules that span the spec. A value its part refuses is parsed whole too, for the message (and since
    a part cannot tell a union's other members). Values that are valid alone but not together are found by
    :func:`expand_sweep`.

    Args:
        spec: the validated spec (nothing is checked without a sweep).
        check_cell: a further check of each whole-spec parse (the service reads a cell's edge files and module
            inputs); every value of a key under ``network`` or ``environment`` is parsed whole and checked with it.

    Raises:
        SpecError: a value that makes an invalid spec (the message names the key and value, the path the field), or a
            key taking more than :data:`MAX_VALUE_SHAPES` kinds of value (path ``sweep.grid.<key>``).
    """
    if spec.sweep is None:
        return
    targets = _targets(spec)
    base = spec.model_dump(mode="json", exclude={"sweep"})
    for key, values in spec.sweep.grid.items():
        part, inside = _part(spec, targets[key][0])
        part_data = part.model_dump(mode="json") if part is not spec else None
        names_files = check_cell is not None and any(path[0] in _FILE_FIELDS for path in targets[key])
        whole = set(range(len(values))) if names_files else _representatives(key, values)
        for index, value in enumerate(values):
            if index not in whole and part_data is not None:
                try:
                    type(part).model_validate(_with_value(part_data, inside, value))
                    continue
                except ValidationError:
                    pass  # parsed whole below, for the message (or a union member the part cannot tell)
            cell = _parse_cell(_with_params(base, targets, {key: value}), "value", {key: value})
            if check_cell is not None:
                check_cell(cell)


def _shape(value: Any) -> Any:
    """A value's JSON shape: its structure with every scalar replaced by its type (``{"p": 0.5}`` -> ``{"p": "float"}``)."""
    if isinstance(value, dict):
        return tuple(sorted((str(k), _shape(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("list", *(_shape(v) for v in value))
    return type(value).__name__


def _representatives(key: str, values: list[Any]) -> set[int]:
    """The indexes of the values a whole spec is parsed with: the first of each shape, a number's least and greatest."""
    first: dict[str, int] = {}
    for index, value in enumerate(values):
        shape = json.dumps(_shape(value))
        if shape not in first:
            if len(first) == MAX_VALUE_SHAPES:
                raise SpecError(f"grid key {key!r} takes values of more than {MAX_VALUE_SHAPES} kinds (shapes); split the "
                                "sweep", path=f"sweep.grid.{key}")
            first[shape] = index
    chosen = set(first.values())
    numbers = [i for i, v in enumerate(values) if isinstance(v, int | float) and not isinstance(v, bool)]
    if numbers:
        chosen |= {min(numbers, key=values.__getitem__), max(numbers, key=values.__getitem__)}
    return chosen


def _part(spec: ExperimentSpec, path: tuple[Segment, ...]) -> tuple[BaseModel, tuple[Segment, ...]]:
    """The nearest model above ``path``'s last segment, and the rest of the path inside it."""
    node: Any = spec
    part: BaseModel = spec
    inside: tuple[Segment, ...] = path
    for depth, segment in enumerate(path[:-1]):
        node = getattr(node, field_named(node, str(segment)) or "") if isinstance(node, BaseModel) else node[segment]
        if isinstance(node, BaseModel):
            part, inside = node, path[depth + 1 :]
    return part, inside


#: The top-level fields under which a grid value may name a file that ``check_cell`` reads (a population's table is
#: read into the value itself, by :func:`engine.grid_files.locate_grid_files`).
_FILE_FIELDS = frozenset({"network", "environment"})

def _targets(spec: ExperimentSpec) -> dict[str, list[tuple[Segment, ...]]]:
    assert spec.sweep is not None
    try:
        fields = type(spec).model_fields
        return check_grid_keys(spec.sweep.grid, {name: getattr(spec, name) for name in fields}, field_names=fields)
    except ValueError as error:
        raise SpecError(str(error), path="sweep") from None


def _with_params(base: dict[str, Any], targets: Mapping[str, list[tuple[Segment, ...]]], params: Mapping[str, Any]) -> dict[str, Any]:
    data = base
    for key, value in params.items():
        for path in targets[key]:
            data = _with_value(data, path, value)
    return data


def _parse_cell(data: dict[str, Any], what: str, params: Mapping[str, Any]) -> ExperimentSpec:
    try:
        return parse_spec(data)
    except SpecError as error:
        wrapped = SpecError(f"sweep {what} ({describe_params(params)}) is not a valid spec:\n{error}")
        wrapped.path = error.path
        raise wrapped from None


def describe_params(params: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v, default=str)}" for k, v in params.items()) or "no params"
