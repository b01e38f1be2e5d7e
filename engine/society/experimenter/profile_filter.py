"""Matching agent profiles: dotted field lookup and the comparison ops of ``filter_agents``."""

from __future__ import annotations

from typing import Any

__all__ = ["FILTER_OPS", "lookup_field", "match_profile"]

FILTER_OPS = ("==", "!=", "<", "<=", ">", ">=", "contains", "in")


def lookup_field(profile: dict[str, Any], path: str) -> tuple[bool, Any]:
    """``(found, value)`` of a dotted profile field (a leading ``profile.`` is ignored)."""
    node: Any = profile
    for part in path.removeprefix("profile.").split("."):
        if not isinstance(node, dict) or part not in node:
            return False, None
        node = node[part]
    return True, node


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def match_profile(actual: Any, op: str, value: Any) -> bool:
    """Whether a profile value satisfies ``actual <op> value``.

    Numbers and numeric strings compare as numbers, text case-insensitively; values of different
    kinds (a bool and a number, text and a number) are never equal and never ordered. ``contains``
    is a substring test on text or membership in a list; ``in`` is membership of ``actual`` in the
    list ``value``.
    """
    if op == "contains":
        if isinstance(actual, str):
            return str(value).casefold() in actual.casefold()
        return isinstance(actual, list) and any(match_profile(item, "==", value) for item in actual)
    if op == "in":
        options = value if isinstance(value, list) else [value]
        return any(match_profile(actual, "==", option) for option in options)
    left: Any = _number(actual)
    right: Any = _number(value)
    if left is None or right is None:
        left, right = actual, value
        if isinstance(left, str) and isinstance(right, str):
            left, right = left.casefold(), right.casefold()
        elif type(left) is not type(right) or op in ("<", "<=", ">", ">="):
            return op == "!=" and type(left) is not type(right)
    comparisons = {"==": lambda: left == right, "!=": lambda: left != right, "<": lambda: left < right,
                   "<=": lambda: left <= right, ">": lambda: left > right, ">=": lambda: left >= right}
    return bool(comparisons[op]())
