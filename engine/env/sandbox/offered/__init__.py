"""The modules sandboxed code may import, each a proxy of whitelisted members, built per execution.

``math``, ``statistics``, ``datetime`` and ``json`` are the proxies of ``namespace.py``; this
package adds ``collections``, ``functools`` and ``operator`` (shared by every execution),
``itertools`` and ``re`` (their iterators and matches tick the execution's step counter) and
``random`` (seeded with the request's seed). :data:`MODULE_MEMBERS` is what the guard checks ``from m import name`` against.
Stdlib only, but for ``re``, which needs ``re2`` (the sandbox process loads it by path).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.env.sandbox.namespace import SAFE_MODULES
from engine.env.sandbox.offered.containers import COLLECTIONS, collections_proxy
from engine.env.sandbox.offered.functional import FUNCTOOLS, functools_proxy
from engine.env.sandbox.offered.iteration import ITERTOOLS, Tick, itertools_proxy
from engine.env.sandbox.offered.operators import OPERATOR, operator_proxy
from engine.env.sandbox.offered.regex import RE, re_proxy
from engine.env.sandbox.offered.seeded_random import RANDOM, SandboxRandom

__all__ = ["MODULE_MEMBERS", "SandboxRandom", "Tick", "module_table"]

_SHARED = {**SAFE_MODULES, "collections": collections_proxy(), "functools": functools_proxy(),
           "operator": operator_proxy()}  # fmt: skip

#: Module name -> the names code may import from it (``from collections import Counter``).
MODULE_MEMBERS: Mapping[str, frozenset[str]] = {
    **{name: frozenset(vars(proxy)) for name, proxy in SAFE_MODULES.items()},
    "collections": frozenset(COLLECTIONS), "functools": frozenset(FUNCTOOLS), "operator": frozenset(OPERATOR),
    "re": frozenset(RE), "itertools": frozenset(ITERTOOLS), "random": frozenset(RANDOM),
}  # fmt: skip


def module_table(tick: Tick, seed: int) -> dict[str, Any]:
    """The modules of one execution: module name -> proxy.

    Args:
        tick: the execution's tick (``itertools`` items and ``re`` matches are steps).
        seed: the request's seed for ``random``.
    """
    return {**_SHARED, "itertools": itertools_proxy(tick), "re": re_proxy(tick), "random": SandboxRandom(seed)}
