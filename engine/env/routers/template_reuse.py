"""Whether code generated for one caller of a template may be replayed for another.

Cached code runs with the next caller's ``variables``, so it must take every value from there. Code
that writes its caller's value as a literal (``send_message(to_agent_id=3, ...)`` for ``{agent}`` =
3) would replay that value for everyone: it is not reusable. Code that quotes the template's own
text (``content="good morning"`` for "say good morning to agent {agent}") is right for that exact
template but not for a merely similar one ("say good night to agent {agent}"): it is exact-only.
The checks look at the code's constants, so they err on the side of not caching.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.instruction_template import PLACEHOLDER

__all__ = ["Reuse", "judge_reuse"]

#: Quoted template text shorter than this does not make code exact-only ("a", "to").
_MIN_QUOTED = 3


@dataclass(frozen=True)
class Reuse:
    """The verdict on one piece of generated code."""

    reusable: bool  #: it takes every caller value from ``variables``
    exact_only: bool = False  #: it quotes text of its template
    reason: str = ""  #: why not reusable, or why exact-only


def judge_reuse(code: str, template: str, variables: Mapping[str, Any]) -> Reuse:
    """Judge ``code``, which worked for ``template`` filled with ``variables``.

    Args:
        code: the generated Python source.
        template: the instruction template it was generated for.
        variables: the values it ran with.
    """
    try:
        tree = ast.parse(code)
    except SyntaxError as error:
        return Reuse(False, reason=f"unparsable: {error}")
    strings, numbers = _constants(tree)
    for name, value in variables.items():
        if _written_out(value, strings, numbers):
            return Reuse(False, reason=f"writes the value of {{{name}}} ({value!r}) as a literal")
    text = PLACEHOLDER.sub(" ", template).lower()
    for constant in strings:
        quoted = constant.strip().lower()
        if len(quoted) >= _MIN_QUOTED and quoted in text:
            return Reuse(True, exact_only=True, reason=f"quotes the template's text {constant!r}")
    for number in numbers:
        if re.search(rf"(?<![\w.]){re.escape(_number_text(number))}(?![\w]|\.\d)", text):
            return Reuse(True, exact_only=True, reason=f"quotes the template's number {number!r}")
    return Reuse(True)


def _constants(tree: ast.AST) -> tuple[list[str], list[int | float]]:
    """The code's string and number constants, without dictionary keys (``results["answer"]``,
    ``variables.get("to")``), which name things rather than carry values."""
    keys: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            keys.add(id(node.slice))
        elif (
            isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get", "pop", "setdefault")
            and node.args and isinstance(node.args[0], ast.Constant)
        ):  # fmt: skip
            keys.add(id(node.args[0]))
    strings: list[str] = []
    numbers: list[int | float] = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Constant) or id(node) in keys:
            continue
        if isinstance(node.value, str):
            strings.append(node.value)
        elif isinstance(node.value, int | float) and not isinstance(node.value, bool):
            numbers.append(node.value)
    return strings, numbers


def _written_out(value: Any, strings: list[str], numbers: list[int | float]) -> bool:
    if isinstance(value, bool) or value is None:
        return False  # True/False/None are too common to tell anything
    if isinstance(value, int | float):
        token = re.compile(rf"(?<![\w.]){re.escape(_number_text(value))}(?![\w]|\.\d)")
        return value in numbers or any(token.search(s) for s in strings)
    text = str(value).strip().lower()
    if not text:
        return False
    if len(text) < _MIN_QUOTED:
        return any(s.strip().lower() == text for s in strings)
    return any(text in s.lower() for s in strings)


def _number_text(number: int | float) -> str:
    return str(int(number)) if isinstance(number, float) and number.is_integer() else str(number)
