"""Example calls shown in the CodeGen decision schema (the ``code`` field's ``examples``).

Plain asks get one call per tool with placeholder values of the right types. Template asks get
the calls whose arguments the template's values fill, written as ``variables["name"]``: a model
sees how to write code that stays right for the next caller, and the simulated LLM, which picks
one of the examples, writes such code.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from engine.env.routers.decision import caller_fields
from engine.env.tool import ToolInfo
from engine.instruction_template import PLACEHOLDER

__all__ = ["example_call", "template_examples"]

_SUFFIX = re.compile(r"_\d+$")
_WORD = re.compile(r"[a-z]+")


def _words(text: str) -> set[str]:
    """Lowercase words of three letters or more ("read_inbox" -> {"read", "inbox"})."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3}


def _placeholder(spec: dict[str, Any]) -> str:
    if "enum" in spec:
        return repr(spec["enum"][0])
    if "const" in spec:
        return repr(spec["const"])
    for branch in spec.get("anyOf", []):
        if branch.get("type") != "null":
            return _placeholder(branch)
    kind = spec.get("type")
    values = {"integer": "1", "number": "1.0", "boolean": "True", "string": '"hello"', "array": "[]", "object": "{}"}
    return values.get(kind, "None") if isinstance(kind, str) else "None"


def _statement(name: str, info: ToolInfo, args: list[str]) -> str:
    call = f"{name}({', '.join(args)})"
    return f'results["answer"] = {call}' if info.readonly else call


def example_call(name: str, info: ToolInfo) -> str:
    """One example line calling ``name`` with placeholder values of the right types.

    Read-only tools store their result in ``results["answer"]``; others are called for effect.
    """
    schema = info.args_model.model_json_schema()
    props = schema.get("properties", {})
    args = [f"{arg}={_placeholder(props[arg])}" for arg in schema.get("required", []) if arg not in caller_fields]
    return _statement(name, info, args)


def template_examples(tools: dict[str, ToolInfo], template: str, variables: Mapping[str, Any]) -> list[str]:
    """Calls that take a template's values from ``variables``, one per tool the values fit.

    A tool fits when every value can go to an argument of its type and every required argument
    gets a value. Values go to arguments by name ("agent" to ``to_agent_id``), then by the word
    before the placeholder in the template ("group {text_2}" to ``group``), then in order. Of the
    fitting tools, those whose name shares the most words with the template are kept.

    Returns:
        The example lines; empty when no tool fits.
    """
    before = {m.group(2): m.group(1).lower() for m in re.finditer(r"(\w+)\W{0,3}\{(\w+)\}", template)}
    wanted = _words(PLACEHOLDER.sub(" ", template))
    fitting: list[tuple[int, str]] = []
    for name, info in tools.items():
        schema = info.args_model.model_json_schema()
        props = {arg: spec for arg, spec in schema.get("properties", {}).items() if arg not in caller_fields}
        required = [arg for arg in schema.get("required", []) if arg in props]
        binding = _bind(props, variables, before)
        if binding is not None and all(arg in binding for arg in required):
            args = [f'{arg}=variables["{binding[arg]}"]' for arg in props if arg in binding]
            fitting.append((len(wanted & _words(name)), _statement(name, info, args)))
    # A tool the template names ("read my inbox": read_inbox) goes before the others, alone: the
    # code then does not depend on which caller happened to ask first.
    best = max((overlap for overlap, _ in fitting), default=0)
    return [example for overlap, example in fitting if overlap == best]


def _bind(props: dict[str, Any], variables: Mapping[str, Any], before: dict[str, str]) -> dict[str, str] | None:
    """Argument -> variable name, every variable placed; None when some value fits no free argument."""
    pairs = []
    for v, (var, value) in enumerate(variables.items()):
        for a, (arg, spec) in enumerate(props.items()):
            if _fits(value, spec):
                pairs.append((-_affinity(var, arg, before.get(var)), v, a, var, arg))
    binding: dict[str, str] = {}
    placed: set[str] = set()
    for *_, var, arg in sorted(pairs):
        if var not in placed and arg not in binding:
            binding[arg] = var
            placed.add(var)
    return binding if len(placed) == len(variables) else None


def _affinity(var: str, arg: str, word_before: str | None) -> int:
    words = arg.lower().split("_")
    base = _SUFFIX.sub("", var.lower())
    if var.lower() == arg.lower():
        return 4
    if base in words or base == arg.lower():
        return 3
    if word_before is not None and word_before in words:
        return 2
    return 1


def _fits(value: Any, spec: dict[str, Any]) -> bool:
    if "anyOf" in spec:
        return any(_fits(value, branch) for branch in spec["anyOf"])
    if "enum" in spec:
        return value in spec["enum"]
    if "const" in spec:
        return bool(value == spec["const"])
    kind = spec.get("type")
    if isinstance(value, bool):
        return kind == "boolean"
    if isinstance(value, int):
        return kind in ("integer", "number")
    if isinstance(value, float):
        return kind == "number"
    return isinstance(value, str) and kind == "string"
