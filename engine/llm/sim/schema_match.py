"""Check a value against a JSON Schema (a compact Draft 2020-12 subset, no format assertions).

The simulated LLM builds most values constructively; this checker covers the cases where
construction alone cannot guarantee validity: ``oneOf`` exclusivity, merged ``allOf`` branches
and ``enum``/``const`` values that must also meet sibling keywords. It understands more than the
generator can build (``pattern``, ``not``, ``if``/``then``/``else``), because checking those is easy.

Schemas arrive with requests (``polis sim-llm`` answers anyone on its port), so ``pattern`` and
``patternProperties`` are searched with RE2 (:mod:`engine.linear_regex`): linear time, never a
stalled server. A pattern RE2 cannot run (backreferences, lookaround) is a ``ValueError``, which
the server answers as an invalid request.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction
from typing import Any
from urllib.parse import unquote

from engine.linear_regex import compile_untrusted

__all__ = ["SchemaMatcher", "is_type", "json_equal", "multiple_ok", "pattern_found", "resolve_ref"]

#: Beyond this many nested ``$ref`` hops a schema is treated as non-terminating.
MAX_REF_DEPTH = 64


def json_equal(a: Any, b: Any) -> bool:
    """Compare two JSON values the way JSON Schema does (``1 == 1.0``, ``True != 1``)."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def pattern_found(pattern: str, text: str) -> bool:
    """Whether the schema ``pattern`` occurs in ``text`` (JSON Schema's unanchored search), in linear time.

    Raises:
        ValueError: ``pattern`` is invalid, or uses a feature RE2 lacks (backreferences, lookaround).
    """
    # JSON may carry lone surrogates, which cannot become UTF-8; RE2 reads such bytes as they are.
    return compile_untrusted(pattern).search(text.encode("utf-8", errors="surrogatepass")) is not None


def is_type(value: Any, name: str) -> bool:
    """Whether ``value`` has the JSON Schema type ``name``."""
    if name == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, _PY_TYPES[name])


_PY_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "boolean": bool,
    "null": type(None),
    "array": list,
    "object": dict,
}


def multiple_ok(value: float, divisor: float) -> bool:
    """``multipleOf`` with the same float semantics as the ``jsonschema`` package."""
    if isinstance(divisor, float):
        quotient = value / divisor
        if not math.isfinite(quotient):
            return (Fraction(value) / Fraction(divisor)).denominator == 1
        return int(quotient) == quotient
    return value % divisor == 0


def resolve_ref(root: Any, ref: str) -> Any:
    """Resolve a local ``$ref`` (``#``, ``#/$defs/Name``, any JSON pointer) against ``root``.

    Raises:
        ValueError: for a remote ref or a pointer that leads nowhere.
    """
    if not isinstance(ref, str) or not ref.startswith("#"):
        raise ValueError(f"only local $ref ('#/...') is supported, got {ref!r}")
    node = root
    pointer = ref[1:]
    if not pointer:
        return node
    for raw in pointer.lstrip("/").split("/"):
        part = unquote(raw).replace("~1", "/").replace("~0", "~")
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, IndexError, ValueError, TypeError):
            raise ValueError(f"$ref {ref!r} does not resolve") from None
    return node


class SchemaMatcher:
    """Validity checks against one root schema (refs resolve against it).

    Args:
        root: the schema document that ``$ref`` pointers resolve against.
    """

    def __init__(self, root: Any) -> None:
        self.root = root

    def ok(self, value: Any, schema: Any, depth: int = 0) -> bool:
        """Whether ``value`` is valid for ``schema`` (formats are not asserted)."""
        if schema is True:
            return True
        if schema is False or depth > MAX_REF_DEPTH or not isinstance(schema, dict):
            return False
        for key, arg in schema.items():
            check = _CHECKS.get(key)
            if check is not None and not check(self, value, arg, schema, depth):
                return False
        return True

    def _ref(self, v: Any, ref: str, s: dict, d: int) -> bool:
        return self.ok(v, resolve_ref(self.root, ref), d + 1)

    def _properties(self, v: Any, props: dict, s: dict, d: int) -> bool:
        return not isinstance(v, dict) or all(self.ok(v[k], sub, d) for k, sub in props.items() if k in v)

    def _additional(self, v: Any, sub: Any, s: dict, d: int) -> bool:
        if not isinstance(v, dict):
            return True
        declared = s.get("properties", {})
        patterns = s.get("patternProperties", {})
        return all(
            self.ok(item, sub, d)
            for key, item in v.items()
            if key not in declared and not any(pattern_found(p, key) for p in patterns)
        )

    def _pattern_properties(self, v: Any, patterns: dict, s: dict, d: int) -> bool:
        if not isinstance(v, dict):
            return True
        return all(self.ok(item, sub, d) for p, sub in patterns.items() for k, item in v.items() if pattern_found(p, k))

    def _items(self, v: Any, sub: Any, s: dict, d: int) -> bool:
        return not isinstance(v, list) or all(self.ok(x, sub, d) for x in v[len(s.get("prefixItems", ())) :])

    def _prefix(self, v: Any, subs: list, s: dict, d: int) -> bool:
        return not isinstance(v, list) or all(self.ok(x, sub, d) for x, sub in zip(v, subs, strict=False))

    def _contains(self, v: Any, sub: Any, s: dict, d: int) -> bool:
        if not isinstance(v, list):
            return True
        count = sum(1 for x in v if self.ok(x, sub, d))
        return s.get("minContains", 1) <= count <= s.get("maxContains", math.inf)

    def _one_of(self, v: Any, subs: list, s: dict, d: int) -> bool:
        return sum(1 for sub in subs if self.ok(v, sub, d)) == 1

    def _if(self, v: Any, sub: Any, s: dict, d: int) -> bool:
        branch = s.get("then", True) if self.ok(v, sub, d) else s.get("else", True)
        return self.ok(v, branch, d)

    def _dependent_schemas(self, v: Any, deps: dict, s: dict, d: int) -> bool:
        return not isinstance(v, dict) or all(self.ok(v, sub, d) for k, sub in deps.items() if k in v)


def _on(kind: str, test: Callable[[Any, Any], bool]) -> Callable[[SchemaMatcher, Any, Any, dict, int], bool]:
    """A check that only applies to values of one JSON type."""
    return lambda m, v, arg, s, d: not is_type(v, kind) or test(v, arg)


def _unique(v: list) -> bool:
    return all(not json_equal(v[i], v[j]) for i in range(len(v)) for j in range(i + 1, len(v)))


_Check = Callable[[SchemaMatcher, Any, Any, dict, int], bool]
_CHECKS: dict[str, _Check] = {
    "$ref": SchemaMatcher._ref,
    "type": lambda m, v, t, s, d: any(is_type(v, n) for n in ([t] if isinstance(t, str) else t)),
    "enum": lambda m, v, opts, s, d: any(json_equal(v, o) for o in opts),
    "const": lambda m, v, c, s, d: json_equal(v, c),
    "properties": SchemaMatcher._properties,
    "additionalProperties": SchemaMatcher._additional,
    "patternProperties": SchemaMatcher._pattern_properties,
    "required": _on("object", lambda v, names: all(n in v for n in names)),
    "propertyNames": lambda m, v, sub, s, d: not isinstance(v, dict) or all(m.ok(k, sub, d) for k in v),
    "minProperties": _on("object", lambda v, n: len(v) >= n),
    "maxProperties": _on("object", lambda v, n: len(v) <= n),
    "dependentRequired": _on(
        "object", lambda v, deps: all(all(r in v for r in rs) for k, rs in deps.items() if k in v)
    ),
    "dependentSchemas": SchemaMatcher._dependent_schemas,
    "items": SchemaMatcher._items,
    "prefixItems": SchemaMatcher._prefix,
    "contains": SchemaMatcher._contains,
    "minItems": _on("array", lambda v, n: len(v) >= n),
    "maxItems": _on("array", lambda v, n: len(v) <= n),
    "uniqueItems": _on("array", lambda v, flag: not flag or _unique(v)),
    "minLength": _on("string", lambda v, n: len(v) >= n),
    "maxLength": _on("string", lambda v, n: len(v) <= n),
    "pattern": _on("string", lambda v, p: pattern_found(p, v)),
    "minimum": _on("number", lambda v, b: v >= b),
    "maximum": _on("number", lambda v, b: v <= b),
    "exclusiveMinimum": _on("number", lambda v, b: v > b),
    "exclusiveMaximum": _on("number", lambda v, b: v < b),
    "multipleOf": _on("number", multiple_ok),
    "allOf": lambda m, v, subs, s, d: all(m.ok(v, sub, d) for sub in subs),
    "anyOf": lambda m, v, subs, s, d: any(m.ok(v, sub, d) for sub in subs),
    "oneOf": SchemaMatcher._one_of,
    "not": lambda m, v, sub, s, d: not m.ok(v, sub, d),
    "if": SchemaMatcher._if,
}
