"""``functools`` for sandboxed code: the helpers that take and return plain callables.

Left out: ``wraps`` and ``update_wrapper`` (their ``assigned`` argument sets any attribute of a
function, ``__code__`` included, past the guard's refusal of attribute assignment),
``singledispatch``, ``total_ordering``, ``cached_property`` and ``partialmethod`` (they need
classes or annotations, which the sandbox does not offer).
"""

from __future__ import annotations

import functools as _functools
from types import SimpleNamespace

__all__ = ["FUNCTOOLS", "functools_proxy"]

#: Every name the ``functools`` proxy holds.
FUNCTOOLS = ("reduce", "partial", "cmp_to_key", "lru_cache", "cache")


def functools_proxy() -> SimpleNamespace:
    """The ``functools`` module as sandboxed code sees it."""
    return SimpleNamespace(**{name: getattr(_functools, name) for name in FUNCTOOLS})
