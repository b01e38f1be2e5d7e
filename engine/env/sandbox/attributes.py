"""Which attribute names sandboxed code may reach: one rule for the guard and for name-taking helpers.

The guard applies it to every ``x.name`` it sees; helpers that take an attribute name as a string
(``operator.attrgetter``, ``operator.methodcaller``) apply it at run time, where the guard cannot
look. Stdlib only: the sandbox process imports it.
"""

from __future__ import annotations

__all__ = ["FORBIDDEN_ATTRIBUTES", "FORBIDDEN_ATTRIBUTE_PREFIXES", "SIZED_METHODS", "attribute_refusal"]

#: Attributes refused although they do not start with ``_``.
FORBIDDEN_ATTRIBUTES = frozenset({
    "format", "format_map", "mro", "ljust", "rjust", "center", "zfill", "expandtabs", "with_traceback", "obj",
})  # fmt: skip
#: Prefixes of frame, code, generator, coroutine, traceback and legacy function attributes.
FORBIDDEN_ATTRIBUTE_PREFIXES = ("f_", "co_", "gi_", "cr_", "ag_", "tb_", "func_", "im_")
#: Methods that can build a huge result in one C call. The guard only lets code call them
#: directly, and such calls go through ``namespace.call_method``, which checks the size first.
SIZED_METHODS = frozenset({"join", "replace", "translate", "extend", "strftime"})


def attribute_refusal(name: str) -> str | None:
    """Why code may not reach attribute ``name`` by a string, or None when it may.

    A sized method is refused too: reached this way, its call would skip the size check.
    """
    if not isinstance(name, str):
        return "attribute names must be strings"
    if name.startswith("_"):
        return f"attribute {name!r} is not allowed (names starting with '_' are private)"
    if name in FORBIDDEN_ATTRIBUTES or name.startswith(FORBIDDEN_ATTRIBUTE_PREFIXES):
        return f"attribute {name!r} is not allowed in the sandbox"
    if name in SIZED_METHODS:
        return f"'.{name}' must be called directly, as in x.{name}(...)"
    return None
