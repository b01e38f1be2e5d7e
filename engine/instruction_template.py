"""Instruction templates: the ``{name}`` placeholders agents and env routers agree on.

An ask_env instruction may be a template (``"send {text} to agent {agent}"``) sent with its
variables; the CodeGen router caches code by template and other routers fill it in. Only bare
names are placeholders: no ``str.format`` field access, conversions or format specs, so filling a
template never evaluates anything.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from typing import Any

__all__ = ["PLACEHOLDER", "fill_template", "is_bare_template", "placeholders"]

#: A placeholder: a bare name in braces.
PLACEHOLDER = re.compile(r"\{(\w+)\}")


def placeholders(template: str) -> frozenset[str]:
    """The ``{name}`` placeholders of a template."""
    return frozenset(PLACEHOLDER.findall(template))


def fill_template(template: str, variables: Mapping[str, Any]) -> str:
    """Substitute ``{name}`` placeholders that have a value; others are left as they are.

    Only bare names are substituted (no ``str.format`` field access or format specs).
    """
    return PLACEHOLDER.sub(lambda m: str(variables[m.group(1)]) if m.group(1) in variables else m.group(0), template)


def is_bare_template(text: str) -> bool:
    """True when every ``str.format`` field of ``text`` is a bare placeholder and nothing is escaped.

    Such a text means the same filled by :func:`fill_template` as by ``str.format``.
    """
    if "{{" in text or "}}" in text:
        return False
    try:
        fields = list(string.Formatter().parse(text))
    except ValueError:  # unbalanced braces
        return False
    return all(
        name is None or (PLACEHOLDER.fullmatch("{" + name + "}") is not None and not spec and conversion is None)
        for _, name, spec, conversion in fields
    )
