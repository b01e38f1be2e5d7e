"""Fold two JSON Schemas into one whose instances satisfy both (the ``allOf`` of the generator).

The merge is a best effort for generation: bounds tighten, types and enums intersect, property
schemas combine into nested ``allOf``. The generator always re-checks a merged result against the
original schema, so a merge that is looser than the truth costs a retry, never an invalid value.
"""

from __future__ import annotations

import math
from itertools import product
from typing import Any

from engine.llm.sim.schema_match import json_equal

__all__ = ["ANNOTATION_KEYS", "constraint_keys", "merge_schemas"]

#: Keywords that never affect validity.
ANNOTATION_KEYS = frozenset(
    {
        "title", "description", "default", "examples", "$schema", "$id", "$anchor", "$comment", "$defs",
        "definitions", "readOnly", "writeOnly", "deprecated", "contentMediaType", "contentEncoding",
        "discriminator", "nullable",
    }
)  # fmt: skip
_LOWER = frozenset({"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties"})
_UPPER = frozenset({"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties"})
_SUBSCHEMA = frozenset({"items", "additionalProperties", "propertyNames"})
_MAX_PRODUCT = 64


def constraint_keys(schema: dict[str, Any]) -> set[str]:
    """The keywords of ``schema`` that constrain values (everything but annotations)."""
    return {k for k in schema if k not in ANNOTATION_KEYS}


def merge_schemas(a: dict[str, Any], b: dict[str, Any], path: str = "#") -> dict[str, Any]:
    """One schema whose instances should satisfy both ``a`` and ``b``.

    Args:
        a: a schema without a top-level ``$ref``/``allOf`` (nested ones are fine).
        b: likewise.
        path: where the merge happens, for error messages.

    Returns:
        The merged schema (inputs are not modified).

    Raises:
        ValueError: the two cannot hold together (no common type, different ``const``, ...).
    """
    out = dict(a)
    for key, bv in b.items():
        if key not in out or key in ANNOTATION_KEYS:
            out.setdefault(key, bv)
            continue
        av = out[key]
        if json_equal(av, bv):
            continue
        if key == "type":
            out[key] = _intersect_types(av, bv, path)
        elif key in _LOWER:
            out[key] = max(av, bv)
        elif key in _UPPER:
            out[key] = min(av, bv)
        elif key == "required":
            out[key] = list(dict.fromkeys([*av, *bv]))
        elif key == "uniqueItems":
            out[key] = av or bv
        elif key == "enum":
            out[key] = [x for x in av if any(json_equal(x, y) for y in bv)]
        elif key == "properties":
            out[key] = {**av, **{k: ({"allOf": [av[k], v]} if k in av else v) for k, v in bv.items()}}
        elif key in _SUBSCHEMA:
            out[key] = False if av is False or bv is False else {"allOf": [av, bv]}
        elif key in ("anyOf", "oneOf"):
            if len(av) * len(bv) > _MAX_PRODUCT:
                raise ValueError(f"{path}/allOf: {key} branches multiply past {_MAX_PRODUCT}")
            # matching exactly one pair <=> exactly one branch on each side, so oneOf survives too
            out[key] = [{"allOf": [x, y]} for x, y in product(av, bv)]
        elif key == "prefixItems" and len(av) == len(bv):
            out[key] = [{"allOf": [x, y]} for x, y in zip(av, bv, strict=True)]
        elif key == "multipleOf" and isinstance(av, int) and isinstance(bv, int):
            out[key] = math.lcm(av, bv)
        else:
            raise ValueError(f"{path}/allOf: cannot merge conflicting {key!r} ({av!r} vs {bv!r})")
    _apply_closed_properties(out, a, b)
    _apply_closed_properties(out, b, a)
    return out


def _intersect_types(av: str | list[str], bv: str | list[str], path: str) -> str | list[str]:
    sa = {av} if isinstance(av, str) else set(av)
    sb = {bv} if isinstance(bv, str) else set(bv)
    both = sa & sb
    if ("integer" in sa and "number" in sb) or ("number" in sa and "integer" in sb):
        both.add("integer")
    if not both:
        raise ValueError(f"{path}/allOf: branches share no type ({av!r} vs {bv!r})")
    return sorted(both) if len(both) > 1 else both.pop()


def _apply_closed_properties(out: dict[str, Any], x: dict[str, Any], y: dict[str, Any]) -> None:
    """Properties only ``y`` declares are "additional" to ``x`` and obey its additionalProperties."""
    extra = x.get("additionalProperties", True)
    if extra is True or "properties" not in y:
        return
    own = x.get("properties", {})
    props = dict(out.get("properties", {}))
    for name in y["properties"]:
        if name in own or name not in props:
            continue
        if extra is False:
            del props[name]
        else:
            props[name] = {"allOf": [props[name], extra]}
    out["properties"] = props
