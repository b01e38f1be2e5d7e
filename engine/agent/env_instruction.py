"""An agent's ask_env instruction as a template plus variables (what the CodeGen cache keys on).

The CodeGen router caches generated code by template, so instructions that differ only in their
values ("send 'hi' to agent 3", "send 'yo' to agent 8") must arrive as one template with different
variables. Two sources, applied in order:

1. the model's own ``{placeholders}`` with their values in ``variables`` (the ask_env tool asks
   for them); a placeholder without a value is reported back, variables no placeholder names are
   dropped;
2. literal values found in the rest of the text, deterministically: quoted text (``'...'``,
   ``"..."``, ``“...”``) becomes ``{text}``, dates and clock times ``{time}``, a number after
   "agent", "player" or "id" ``{agent}``, any other number ``{number}``; repeats are ``_2``, ``_3``...

Names depend on where values stand, never on the values, so two agents saying the same thing
about different values share one template. Filling the template gives back the instruction
exactly (quotes stay in the template, the value inside them moves to the variables).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.instruction_template import PLACEHOLDER, fill_template

__all__ = ["EnvInstruction", "templatize"]

_LITERAL = re.compile(
    r'"(?P<dq>[^"\n]+)"'
    r"|“(?P<cq>[^”\n]+)”"
    # An apostrophe inside a word (prisoner's, don't) neither opens nor closes a quote.
    r"|(?<![\w'])'(?P<sq>(?:[^'\n]|'(?=\w))+)'(?![\w'])"
    r"|(?<![\w.:-])(?P<time>\d{4}-\d{2}-\d{2}(?:[T ]\d{1,2}:\d{2}(?::\d{2})?)?|\d{1,2}:\d{2}(?::\d{2})?)(?![\w:]|\.\d)"
    r"|(?<![\w.])(?P<number>\d+(?:\.\d+)?)(?![\w]|\.\d)"
)
#: A number right after one of these words is an agent id.
_ID_WORDS = frozenset({"agent", "agents", "agent_id", "player", "players", "id", "ids", "person"})
_WORD_BEFORE = re.compile(r"(\w+)\W{0,3}$")


@dataclass(frozen=True)
class EnvInstruction:
    """An instruction as sent in template mode."""

    template: str  #: the instruction with ``{name}`` placeholders
    variables: dict[str, Any] = field(default_factory=dict)  #: a value for every placeholder
    missing: tuple[str, ...] = ()  #: placeholders the model wrote without giving a value

    @property
    def text(self) -> str:
        """The instruction with its values filled in."""
        return fill_template(self.template, self.variables)


def templatize(instruction: str, variables: Mapping[str, Any] | None = None, *, literals: bool = True) -> EnvInstruction:
    """Split ``instruction`` into a template and its variables.

    Args:
        instruction: the model's instruction, possibly with ``{name}`` placeholders.
        variables: the model's values for those placeholders.
        literals: also turn quoted text, times and numbers into placeholders.

    Returns:
        The template, the variables its placeholders use, and the placeholders left without a value.
    """
    given = dict(variables or {})
    names = set(PLACEHOLDER.findall(instruction))  # taken; unused variables reserve nothing
    kept: dict[str, Any] = {}
    missing: list[str] = []
    parts: list[str] = []
    position = 0
    for match in PLACEHOLDER.finditer(instruction):
        name = match.group(1)
        text = instruction[position : match.start()]
        parts += [_literals(text, parts, kept, names) if literals else text, match.group(0)]
        if name in given:
            kept[name] = given[name]
        elif name not in missing:
            missing.append(name)
        position = match.end()
    tail = instruction[position:]
    parts.append(_literals(tail, parts, kept, names) if literals else tail)
    return EnvInstruction("".join(parts), kept, tuple(missing))


def _literals(segment: str, before: list[str], kept: dict[str, Any], names: set[str]) -> str:
    """``segment`` with its literal values replaced by fresh placeholders (recorded in ``kept``)."""
    out: list[str] = []
    position = 0
    for match in _LITERAL.finditer(segment):
        kind = match.lastgroup
        assert kind is not None
        value: Any = match.group(kind)
        if kind == "number":
            previous = _WORD_BEFORE.search("".join(before) + segment[: match.start()])
            base = "agent" if previous is not None and previous.group(1).lower() in _ID_WORDS else "number"
            value = _number(value)
        else:
            base = "time" if kind == "time" else "text"
        name = _fresh(base, names)
        start, end = match.span(kind)
        out += [segment[position:start], "{" + name + "}"]
        kept[name] = value
        position = end
    out.append(segment[position:])
    return "".join(out)


def _fresh(base: str, names: set[str]) -> str:
    name, n = base, 1
    while name in names:
        n += 1
        name = f"{base}_{n}"
    names.add(name)
    return name


def _number(text: str) -> int | float | str:
    """The number ``text`` stands for, kept as text when converting would not write it back the same."""
    if text.isdigit() and str(int(text)) == text:
        return int(text)
    if "." in text and repr(float(text)) == text:
        return float(text)
    return text
