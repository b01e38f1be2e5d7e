"""``collections`` for sandboxed code: the container classes, and ``namedtuple`` with a bounded size.

The classes are the real ones: code cannot subclass them (no ``class`` statement), and what they
hold that is not data starts with ``_`` (``namedtuple``'s ``_asdict``, ``_fields``), which the
guard refuses. In ``results`` a ``Counter``, ``defaultdict`` or ``OrderedDict`` is stored as a dict,
a ``deque`` or a named tuple as a list (``runtime.collect``).
"""

from __future__ import annotations

import collections as _collections
from types import SimpleNamespace
from typing import Any

__all__ = ["COLLECTIONS", "MAX_FIELDS", "collections_proxy"]

#: Fields one ``namedtuple`` may have (its class is built by compiling generated source).
MAX_FIELDS = 256
#: Every name the ``collections`` proxy holds.
COLLECTIONS = ("Counter", "OrderedDict", "defaultdict", "deque", "namedtuple")


def _namedtuple(typename: str, field_names: Any, *, rename: bool = False, defaults: Any = None) -> type:
    names = field_names.replace(",", " ").split() if isinstance(field_names, str) else list(field_names)
    if len(names) > MAX_FIELDS:
        raise ValueError(f"a namedtuple of {len(names)} fields is too large for the sandbox (at most {MAX_FIELDS})")
    if sum(len(str(name)) for name in names) > 100 * MAX_FIELDS:
        raise ValueError("a namedtuple's field names are too long for the sandbox")
    if not isinstance(typename, str) or len(typename) > 100:
        raise ValueError("a namedtuple's name must be a short string")
    return _collections.namedtuple(typename, names, rename=rename, defaults=defaults, module="sandbox")


def collections_proxy() -> SimpleNamespace:
    """The ``collections`` module as sandboxed code sees it."""
    classes = {name: getattr(_collections, name) for name in COLLECTIONS if name != "namedtuple"}
    return SimpleNamespace(**classes, namedtuple=_namedtuple)
