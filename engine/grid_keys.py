"""A sweep's grid keys: dotted paths into a spec (``population.0.count``, ``agents.*.config.max_react_turns``),
checked and resolved to the concrete paths they set.

Sans-IO and below the spec: the spec's ``sweep`` validator checks its keys here, as the sweep's expansion
(:mod:`engine.sweep`) and the service's grants do; each gives the spec's top-level field names.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from typing import Any

from pydantic import BaseModel

from engine.storage.sweep_layout import param_column

__all__ = ["Segment", "check_grid_keys", "field_named"]

_KEY = re.compile(r"[^.\s]+(\.[^.\s]+)*")
_UNSWEEPABLE = {"seed": "each cell's seed is derived from the spec's seed; sweep replications instead",
                "sweep": "a sweep cannot sweep itself"}

#: One step of a resolved path: a field or mapping key, or a list index.
Segment = str | int


def _resolve(node: Any, segments: list[str], where: str) -> list[tuple[Segment, ...]]:
    """Concrete paths (``*`` expanded) that ``segments`` reach from ``node``; ValueError if none can."""
    if not segments:
        return [()]
    seg, rest = segments[0], segments[1:]
    here = f"{where}.{seg}"
    if node is None:
        raise ValueError(f"{where} is not set (null), so it has no {seg!r}; sweep {where!r} with whole values instead")
    if isinstance(node, BaseModel):
        if (name := field_named(node, seg)) is None:
            fields = [info.alias or name for name, info in type(node).model_fields.items()]
            raise ValueError(f"{where} has no field {seg!r}; its fields: {', '.join(fields)}")
        return [(seg, *p) for p in _resolve(getattr(node, name), rest, here)]
    if isinstance(node, Mapping):
        if seg == "*":
            raise ValueError(f"{where} is a mapping; '*' ranges over list elements only")
        if seg in node:
            return [(seg, *p) for p in _resolve(node[seg], rest, here)]
        if not rest:
            return [(seg,)]  # a new key in a free-form mapping (options, kwargs, config, ...)
        raise ValueError(f"{where} has no key {seg!r}")
    if isinstance(node, list | tuple):
        if seg == "*":
            if not node:
                raise ValueError(f"{where} is empty, so '*' matches nothing")
            indices: list[int] = list(range(len(node)))
        elif seg.isdigit() and int(seg) < len(node):
            indices = [int(seg)]
        else:
            raise ValueError(f"{where} is a list of {len(node)}; {seg!r} is neither an index below {len(node)} nor '*'")
        return [(i, *p) for i in indices for p in _resolve(node[i], rest, f"{where}.{i}")]
    raise ValueError(f"{where} is a {type(node).__name__} value, which has no {seg!r}")


def field_named(model: BaseModel, key: str) -> str | None:
    """The field of ``model`` that a spec writes as ``key`` (its alias, as in ``from``, or else its name), if any."""
    for name, info in type(model).model_fields.items():
        if (info.alias or name) == key:
            return name
    return None


def _overlap(a: str, b: str) -> bool:
    pairs = list(zip(a.split("."), b.split("."), strict=False))
    return all(x == y or "*" in (x, y) for x, y in pairs)


def check_grid_keys(grid: Mapping[str, Any], fields: Mapping[str, Any], *,
                    field_names: Collection[str]) -> dict[str, list[tuple[Segment, ...]]]:
    """Check that every grid key is a sweepable path and resolve it.

    Args:
        grid: the sweep grid (path -> values).
        fields: the spec's top-level fields by name (an ``ExperimentSpec``'s, or the validated
            ones during validation; keys whose first field is absent are skipped).
        field_names: every top-level field the spec has (``ExperimentSpec.model_fields``).

    Returns:
        Each resolved key's concrete paths (``*`` expanded).

    Raises:
        ValueError: a key is malformed, unsweepable, does not resolve, overlaps another key, or
            maps to the same SQL column as another key. The message names the key.
    """
    resolved: dict[str, list[tuple[Segment, ...]]] = {}
    columns: dict[str, str] = {}
    for key in grid:
        if not _KEY.fullmatch(key):
            raise ValueError(f"grid key {key!r} is not a dotted path such as 'population.0.count'")
        first, *rest = key.split(".")
        if first in _UNSWEEPABLE:
            raise ValueError(f"grid key {key!r}: {_UNSWEEPABLE[first]}")
        if first not in field_names:
            raise ValueError(f"grid key {key!r}: the spec has no field {first!r}; its fields: {', '.join(field_names)}")
        clash = columns.setdefault(param_column(key).lower(), key)
        if clash != key:
            raise ValueError(f"grid keys {clash!r} and {key!r} both become column {param_column(key)!r}")
        for other in resolved:
            if _overlap(other, key):
                raise ValueError(f"grid keys {other!r} and {key!r} overlap: one sets part of the other")
        if first in fields:
            try:
                resolved[key] = [(first, *p) for p in _resolve(fields[first], rest, first)]
            except ValueError as error:
                raise ValueError(f"grid key {key!r} does not resolve: {error}") from None
    return resolved
