"""Generate a value that is valid for a JSON Schema.

The simulated LLM answers structured-output and tool-call requests with instances built here.
Generation is constructive where it can be and checked (``schema_match``) where it cannot:
``oneOf`` exclusivity, merged ``allOf`` branches, ``enum`` values under sibling keywords. A keyword
that would make validity impossible to guarantee raises ``ValueError`` naming the keyword and the
schema path; an unsatisfiable schema raises too. Nothing invalid is ever returned.
"""

from __future__ import annotations

import copy
import random
from typing import Any

from engine.llm.sim.schema_match import MAX_REF_DEPTH, SchemaMatcher, json_equal, resolve_ref
from engine.llm.sim.schema_merge import constraint_keys, merge_schemas
from engine.llm.sim.schema_scalars import ATTEMPTS, integer_instance, number_instance, string_instance
from engine.llm.sim.vocabulary import WORDS

__all__ = ["generate_instance"]

#: Past this nesting depth optional parts are left out and terminating branches are preferred.
SOFT_DEPTH = 6
_SIMPLE_TYPES = ("string", "integer", "number", "boolean", "null")
_CONTAINERS = ("object", "array")
_UNSUPPORTED = frozenset(
    {
        "pattern", "patternProperties", "not", "if", "then", "else", "contains", "minContains", "maxContains",
        "dependentRequired", "dependentSchemas", "dependencies", "unevaluatedItems", "unevaluatedProperties",
        "$dynamicRef", "$recursiveRef",
    }
)  # fmt: skip
_TYPE_HINTS: tuple[tuple[str, frozenset[str]], ...] = (
    ("object", frozenset({"properties", "required", "additionalProperties", "minProperties", "maxProperties",
                          "propertyNames"})),
    ("array", frozenset({"items", "prefixItems", "minItems", "maxItems", "uniqueItems"})),
    ("string", frozenset({"minLength", "maxLength", "format"})),
    ("number", frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})),
)  # fmt: skip


def generate_instance(schema: dict[str, Any] | bool, rng: random.Random) -> Any:
    """Build a value that is valid for ``schema``.

    Args:
        schema: a JSON Schema (Draft 2020-12 subset; pydantic v2 ``model_json_schema()`` output
            works), with local ``$ref`` into ``$defs``/``definitions``.
        rng: the only source of randomness, so equal seeds give equal values.

    Returns:
        A JSON-compatible value (dict, list, str, int, float, bool or None).

    Raises:
        ValueError: the schema uses a keyword this generator cannot satisfy by construction
            (``pattern``, ``not``, ``if``/``then``, ...), an unknown string ``format``, a remote
            ``$ref``, or it admits no value at all. The message names the keyword and path.
    """
    return _Generator(schema, rng).gen(schema, "#", 0)


class _Generator:
    def __init__(self, root: Any, rng: random.Random) -> None:
        self.root = root
        self.rng = rng
        self.matcher = SchemaMatcher(root)
        self.refs: dict[str, Any] = {}

    def gen(self, schema: Any, path: str, depth: int) -> Any:
        if depth > MAX_REF_DEPTH:
            raise ValueError(f"{path}: schema recursion does not terminate within {MAX_REF_DEPTH} levels")
        if schema is True:
            schema = {}
        elif schema is False:
            raise ValueError(f"{path}: the schema `false` admits no value")
        elif not isinstance(schema, dict):
            raise ValueError(f"{path}: a schema must be an object or a boolean, not {type(schema).__name__}")
        bad = schema.keys() & _UNSUPPORTED
        if bad:
            key = sorted(bad)[0]
            raise ValueError(f"unsupported JSON Schema keyword {key!r} at {path}: cannot guarantee a valid instance")
        if "$ref" in schema:
            ref = schema["$ref"]
            target = self._resolve(ref, path)
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            if constraint_keys(rest):
                return self.gen({"allOf": [target, rest]}, path, depth + 1)
            return self.gen(target, ref, depth + 1)
        if "allOf" in schema:
            return self._all_of(schema, path, depth)
        if "anyOf" in schema or "oneOf" in schema:
            return self._union(schema, path, depth)
        if "const" in schema or "enum" in schema:
            return self._enum(schema, path)
        kind = self._pick_type(schema, path, depth)
        return getattr(self, "_" + kind)(schema, path, depth)

    def _resolve(self, ref: str, path: str) -> Any:
        if ref not in self.refs:
            try:
                self.refs[ref] = resolve_ref(self.root, ref)
            except ValueError as exc:
                raise ValueError(f"{path}: {exc}") from None
        return self.refs[ref]

    # -- combinators ---------------------------------------------------------------------------

    def _deref(self, schema: Any, path: str, depth: int) -> dict[str, Any]:
        """The schema with top-level ``$ref`` and ``allOf`` folded into one dict."""
        if depth > MAX_REF_DEPTH:
            raise ValueError(f"{path}: schema recursion does not terminate within {MAX_REF_DEPTH} levels")
        if schema is True:
            return {}
        if not isinstance(schema, dict):
            return self.gen(schema, path, depth)  # raises the right error for False / non-schemas
        if "$ref" in schema:
            target = self._deref(self._resolve(schema["$ref"], path), schema["$ref"], depth + 1)
            rest = self._deref({k: v for k, v in schema.items() if k != "$ref"}, path, depth + 1)
            return merge_schemas(target, rest, path) if constraint_keys(rest) else target
        if "allOf" in schema:
            merged = {k: v for k, v in schema.items() if k != "allOf"}
            for i, branch in enumerate(schema["allOf"]):
                merged = merge_schemas(merged, self._deref(branch, f"{path}/allOf/{i}", depth + 1), path)
            return merged
        return schema

    def _all_of(self, schema: dict[str, Any], path: str, depth: int) -> Any:
        if not isinstance(schema["allOf"], list) or not schema["allOf"]:
            raise ValueError(f"{path}/allOf: must be a non-empty array")
        merged = self._deref(schema, path, depth)
        for _ in range(ATTEMPTS):
            value = self.gen(merged, path, depth + 1)
            if self.matcher.ok(value, schema):
                return value
        raise ValueError(f"{path}/allOf: could not build a value valid for every branch")

    def _union(self, schema: dict[str, Any], path: str, depth: int) -> Any:
        key = "anyOf" if "anyOf" in schema else "oneOf"
        branches = schema[key]
        if not isinstance(branches, list) or not branches:
            raise ValueError(f"{path}/{key}: must be a non-empty array")
        rest = {k: v for k, v in schema.items() if k != key}
        merge = bool(constraint_keys(rest))
        order = list(range(len(branches)))
        self.rng.shuffle(order)
        if depth >= SOFT_DEPTH:
            order.sort(key=lambda i: _weight(branches[i]))
        first_error: ValueError | None = None
        for attempt in range(ATTEMPTS):
            if not order:
                break
            i = order[attempt % len(order)]
            sub = {"allOf": [rest, branches[i]]} if merge else branches[i]
            try:
                value = self.gen(sub, f"{path}/{key}/{i}", depth + 1)
            except ValueError as exc:  # this branch cannot be built; another may
                first_error = first_error or exc
                order.remove(i)
                continue
            if (key == "anyOf" and not merge) or self.matcher.ok(value, schema):
                return value
        if first_error is not None and not order:
            raise first_error
        raise ValueError(
            f"{path}/{key}: no generated value matched {'exactly one branch' if key == 'oneOf' else 'the schema'}"
        )

    def _enum(self, schema: dict[str, Any], path: str) -> Any:
        options = [schema["const"]] if "const" in schema else schema["enum"]
        if not isinstance(options, list):
            raise ValueError(f"{path}/enum: must be an array")
        valid = [o for o in options if self.matcher.ok(o, schema)]
        if not valid:
            raise ValueError(f"{path}: no enum/const value satisfies the rest of the schema")
        value = self.rng.choice(valid)
        return copy.deepcopy(value) if isinstance(value, (dict, list)) else value

    def _pick_type(self, schema: dict[str, Any], path: str, depth: int) -> str:
        declared = schema.get("type")
        if declared is None:
            keys = schema.keys()
            hinted = [name for name, hints in _TYPE_HINTS if keys & hints]
            options = hinted[:1] or list(_SIMPLE_TYPES)
        else:
            options = [declared] if isinstance(declared, str) else list(declared)
            unknown = [t for t in options if t not in _SIMPLE_TYPES and t not in _CONTAINERS]
            if unknown or not options:
                raise ValueError(f"{path}/type: unknown or empty type {declared!r}")
            if depth >= SOFT_DEPTH and len(options) > 1:
                options = [t for t in options if t not in _CONTAINERS] or options
        return options[0] if len(options) == 1 else self.rng.choice(options)

    # -- scalars -------------------------------------------------------------------------------

    def _null(self, schema: dict[str, Any], path: str, depth: int) -> None:
        return None

    def _boolean(self, schema: dict[str, Any], path: str, depth: int) -> bool:
        return self.rng.random() < 0.5

    def _string(self, schema: dict[str, Any], path: str, depth: int) -> str:
        return string_instance(schema, self.rng, path)

    def _integer(self, schema: dict[str, Any], path: str, depth: int) -> int:
        return integer_instance(schema, self.rng, path)

    def _number(self, schema: dict[str, Any], path: str, depth: int) -> float:
        return number_instance(schema, self.rng, path)

    # -- containers ----------------------------------------------------------------------------

    def _object(self, schema: dict[str, Any], path: str, depth: int) -> dict[str, Any]:
        props: dict[str, Any] = schema.get("properties", {})
        required: list[str] = schema.get("required", [])
        extra = schema.get("additionalProperties")  # None: absent (allowed, but not volunteered)
        names = schema.get("propertyNames")
        lo, hi = schema.get("minProperties", 0), schema.get("maxProperties")
        if hi is not None and max(len(set(required)), lo) > hi:
            raise ValueError(f"{path}: {len(set(required))} required / minProperties {lo} exceed maxProperties {hi}")
        out: dict[str, Any] = {}

        def add(key: str, sub: Any) -> None:
            if names is not None and not self.matcher.ok(key, names):
                raise ValueError(f"{path}: property {key!r} violates propertyNames")
            out[key] = self.gen(sub, f"{path}/properties/{key}", depth + 1)

        for key in required:
            if key in out:
                continue
            if key not in props and extra is False:
                raise ValueError(f"{path}: required property {key!r} is forbidden by additionalProperties: false")
            add(key, props.get(key, extra if isinstance(extra, dict) else True))
        optional = [k for k in props if k not in out]
        keep = 0.5 if depth < SOFT_DEPTH else 0.0
        for key in optional:
            if (hi is None or len(out) < hi) and self.rng.random() < keep and _name_ok(self.matcher, key, names):
                add(key, props[key])
        for key in optional:  # top up to minProperties with declared ones first
            if len(out) >= lo:
                break
            if key not in out and _name_ok(self.matcher, key, names):
                add(key, props[key])
        wanted = self.rng.randint(0, 2) if extra is not None and extra is not False and depth < SOFT_DEPTH else 0
        wanted = max(wanted, lo - len(out)) if extra is not False else 0
        if hi is not None:
            wanted = min(wanted, hi - len(out))
        sub = extra if isinstance(extra, dict) else True
        for _ in range(wanted * ATTEMPTS):
            if wanted <= 0:
                break
            if names is None:
                key = self.rng.choice(WORDS)
            else:
                key = self.gen({"allOf": [{"type": "string"}, names]}, f"{path}/propertyNames", depth + 1)
            if key not in props and key not in out:
                out[key] = self.gen(sub, f"{path}/additionalProperties", depth + 1)
                wanted -= 1
        if len(out) < lo:
            raise ValueError(f"{path}: cannot reach minProperties {lo}")
        return out

    def _array(self, schema: dict[str, Any], path: str, depth: int) -> list[Any]:
        prefix: list[Any] = schema.get("prefixItems", [])
        items = schema.get("items", True)
        lo, hi = schema.get("minItems", 0), schema.get("maxItems")
        if items is False:
            hi = len(prefix) if hi is None else min(hi, len(prefix))
        if hi is not None and lo > hi:
            raise ValueError(f"{path}: minItems {lo} > maxItems {hi} (items allowed)")
        top = max(lo, 3 if hi is None else min(hi, 3))
        size = lo if depth >= SOFT_DEPTH else self.rng.randint(lo, top)
        unique = schema.get("uniqueItems", False)
        out: list[Any] = []
        for i in range(size):
            sub, where = (prefix[i], f"{path}/prefixItems/{i}") if i < len(prefix) else (items, f"{path}/items")
            for _ in range(ATTEMPTS):
                value = self.gen(sub, where, depth + 1)
                if not unique or not any(json_equal(value, seen) for seen in out):
                    out.append(value)
                    break
            else:
                if len(out) >= lo:
                    return out
                raise ValueError(f"{path}: cannot find {lo} unique items")
        return out


def _name_ok(matcher: SchemaMatcher, key: str, names: Any) -> bool:
    return names is None or matcher.ok(key, names)


def _weight(schema: Any) -> tuple[bool, bool]:
    """Sort key that puts terminating (ref-free, scalar) branches first."""
    text = repr(schema)
    return "$ref" in text, any(f"'{t}'" in text for t in _CONTAINERS) or "properties" in text
