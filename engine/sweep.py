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
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import SpecError
from engine.grid_keys import Segment, check_grid_keys
from engine.spec import ExperimentSpec, parse_spec
from engine.storage.sweep_layout import cell_dir

__all__ = ["MAX_CELLS", "SweepCell", "check_sweep_values", "derive_seed", "describe_params", "expand_sweep"]

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


def _assign(data: Any, path: tuple[Segment, ...], value: Any) -> None:
    for segment in path[:-1]:
        data = data[segment]
    data[path[-1]] = copy.deepcopy(value)


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


def check_sweep_values(spec: ExperimentSpec) -> None:
    """Check each value of each grid key in the spec it makes (the other keys as the spec has them): what a
    submitted sweep is checked with, so that no cell's value is found invalid only when that cell's turn comes.
    One parse per value, not per cell: values that are valid alone but not together are found by
    :func:`expand_sweep`.

    Raises:
        SpecError: a value that makes an invalid spec (the message names the key and value, the path the field).
    """
    if spec.sweep is None:
        return
    targets = _targets(spec)
    base = spec.model_dump(mode="json", exclude={"sweep"})
    for key, values in spec.sweep.grid.items():
        for value in values:
            _parse_cell(_with_params(base, targets, {key: value}), "value", {key: value})


def _targets(spec: ExperimentSpec) -> dict[str, list[tuple[Segment, ...]]]:
    assert spec.sweep is not None
    try:
        fields = type(spec).model_fields
        return check_grid_keys(spec.sweep.grid, {name: getattr(spec, name) for name in fields}, field_names=fields)
    except ValueError as error:
        raise SpecError(str(error), path="sweep") from None


def _with_params(base: dict[str, Any], targets: Mapping[str, list[tuple[Segment, ...]]], params: Mapping[str, Any]) -> dict[str, Any]:
    data = copy.deepcopy(base)
    for key, value in params.items():
        for path in targets[key]:
            _assign(data, path, value)
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
