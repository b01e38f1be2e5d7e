"""The files a sweep's grid values name, located as the spec's own are.

A grid value may set a whole population, network or layer, or a layer's ``from``; each such value is passed through
the same ``Locate`` as the spec (the CLI's spec folder, or the service's input folders), so a cell opens only what
the same name would open in the base spec. :mod:`engine.spec` calls this when it parses with a ``locate``; the
service's intake calls it for a spec it parsed first.
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar

from pydantic import BaseModel

from engine.errors import SpecError
from engine.grid_keys import Segment, check_grid_keys
from engine.network.files import locate_network_files
from engine.population.files import Locate, read_population_files

__all__ = ["locate_grid_files"]

SpecT = TypeVar("SpecT", bound=BaseModel)


#: A population's fields that choose its table: a grid value may replace the whole population (its table is then read
#: as the spec's own are), never one of these alone, which would leave the rows read from the base's table.
_TABLE_FIELDS = frozenset({"from", "codebook", "columns", "rows"})


def locate_grid_files(spec: SpecT, locate: Locate) -> SpecT:
    """``spec`` with the files its sweep's grid values name located as the spec's own are.

    A grid value may set a whole population, network or layer, or a layer's ``from``: each is passed through
    ``locate`` (the CLI's spec folder, or the service's ``POLIS_INPUT_DIRS``) and the population tables it names are
    read into its rows, so a cell opens only what the same name would open in the base spec.

    Args:
        spec: a validated spec (returned as it is without a sweep).
        locate: where a named file is read from; it refuses the names its caller does not allow.

    Returns:
        The spec with every such grid value replaced by its located form.

    Raises:
        SpecError: a value names a file ``locate`` refuses or that cannot be read, or a key sets one of a
            population's table fields alone (path ``sweep.grid.<key>``, with ``.<index>`` for a value).
    """
    sweep = getattr(spec, "sweep", None)
    if sweep is None:
        return spec
    fields = type(spec).model_fields
    try:
        targets = check_grid_keys(sweep.grid, {name: getattr(spec, name) for name in fields}, field_names=fields)
    except ValueError as error:
        raise SpecError(str(error), path="sweep") from None
    grid: dict[str, list[Any]] = {}
    for key, values in sweep.grid.items():
        paths = [path for path in targets[key] if path[0] in ("population", "network")]
        if not paths:
            grid[key] = values
            continue
        if any(path[0] == "population" and _TABLE_FIELDS.intersection(map(str, path[2:])) for path in paths):
            raise SpecError(f"grid key {key!r} sets part of a population's table; sweep the whole population "
                            f"({'.'.join(map(str, paths[0][:2]))}) to give each cell its own table", path=f"sweep.grid.{key}")
        grid[key] = [_located(paths, value, locate, f"sweep.grid.{key}.{index}") for index, value in enumerate(values)]
    return spec.model_copy(update={"sweep": sweep.model_copy(update={"grid": grid})})


def _located(paths: list[tuple[Segment, ...]], value: Any, locate: Locate, field: str) -> Any:
    """``value`` with its files located, placed at each of ``paths`` in turn (the same value for each, unless a
    population's index shows in a message)."""
    found = value
    for path in paths:
        skeleton: Any = copy.deepcopy(value)
        for segment in reversed(path):
            skeleton = [{}] * segment + [skeleton] if isinstance(segment, int) else {segment: skeleton}
        try:
            skeleton = locate_network_files(read_population_files(skeleton, locate), locate)
        except SpecError as error:
            raise SpecError(str(error), path=field) from None
        for segment in path:
            skeleton = skeleton[segment]
        found = skeleton
    return found
