"""Bounded ``str.format`` templates: what a spec may ask ``str.format`` to produce.

A spec's templates (``profile_template`` values, a rule-based agent's ``instruction``) are filled
with ``str.format``. A format spec's width or precision is a number the spec chooses, so
``"{i:>300000000}"`` (20 bytes) asks for a 300 MB string per agent. :func:`check_format_template`
refuses nested fields in format specs and any width or precision above
:data:`MAX_FORMAT_WIDTH`, and :func:`formatted_size_bound` bounds what a checked template can
produce, so a population's size can be checked before any member is made.
"""

from __future__ import annotations

import re
import string
from collections.abc import Collection, Mapping
from typing import Any

__all__ = ["MAX_FORMAT_WIDTH", "check_format_arguments", "check_format_template", "formatted_size_bound"]

#: The largest width or precision a template's format spec may name.
MAX_FORMAT_WIDTH = 1000
_NUMBER = re.compile(r"\d+")


def check_format_template(template: str, names: Collection[str]) -> None:
    """Check that filling ``template`` with ``str.format`` stays small and uses only ``names``.

    Args:
        template: the text with ``{name}`` or ``{name:spec}`` fields.
        names: the field names the template may use.

    Raises:
        ValueError: unbalanced braces, an unknown field, a nested field inside a format spec,
            or a width or precision above :data:`MAX_FORMAT_WIDTH`.
    """
    try:
        fields = [(name, spec) for _, name, spec, _ in string.Formatter().parse(template) if name is not None]
    except ValueError as error:
        raise ValueError(f"not a valid template: {error}") from None
    unknown = {name for name, _ in fields} - set(names)
    if unknown:
        raise ValueError(f"uses unknown placeholder(s) {sorted(unknown)}; use {' or '.join('{' + n + '}' for n in sorted(names))}")
    for name, spec in fields:
        if (spec or "").endswith("c"):
            raise ValueError(f"the format spec of {{{name}}} asks for a character ('c'), which large numbers do not have")
        if "{" in (spec or ""):
            raise ValueError(f"the format spec of {{{name}}} has a nested field; widths must be literal numbers")
        # Every width and precision is a run of digits in the spec (a digit fill is followed by
        # an align character, so it never joins the width): any run over the limit is refused.
        widest = max((int(run) for run in _NUMBER.findall(spec or "")), default=0)
        if widest > MAX_FORMAT_WIDTH:
            raise ValueError(f"the format spec {spec!r} of {{{name}}} asks for width or precision {widest}; "
                             f"at most {MAX_FORMAT_WIDTH} is allowed")


def check_format_arguments(arguments: Mapping[str, Any], names: Collection[str]) -> None:
    """Check every string value of a tool call's ``arguments`` as a template of ``names``.

    Raises:
        ValueError: the first bad one, as ``arguments.<key>: <problem>``.
    """
    for key, item in arguments.items():
        if isinstance(item, str):
            try:
                check_format_template(item, names)
            except ValueError as error:
                raise ValueError(f"arguments.{key}: {error}") from None


def formatted_size_bound(template: str, value_digits: int) -> int:
    """An upper bound on the length of a template checked by :func:`check_format_template`, once filled.

    Args:
        template: the template.
        value_digits: the decimal digits of the largest integer filled in; the bound adds room for
            binary digits, signs, grouping, prefixes and exponents.
    """
    total = 0
    for literal, name, spec, _ in string.Formatter().parse(template):
        total += len(literal)
        if name is not None:
            numbers = [int(run) for run in _NUMBER.findall(spec or "")]
            total += 4 * value_digits + 16 + sum(numbers)
    return total
