"""``itertools`` for sandboxed code: every item an iterator yields is a step.

An ``itertools`` iterator is a C loop: ``list(itertools.count())`` or
``max(itertools.product(range(1000), repeat=9))`` never reaches a tick of the instrumented code,
so only the OS limits of the sandbox process would stop it. Wrapped, each item counts against the
step limit and time limit like a loop iteration, in a process and in a thread alike.
"""

from __future__ import annotations

import itertools as _itertools
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

__all__ = ["ITERTOOLS", "MAX_TUPLE", "Tick", "itertools_proxy"]

#: The execution's tick: counts a step, raises the execution's ``Stop`` once a limit is hit.
Tick = Callable[[], bool]

#: Functions offered (``chain.from_iterable`` too). ``tee`` is left out: its shared buffer grows
#: without a step when one copy runs ahead.
ITERTOOLS = ("accumulate", "chain", "combinations", "combinations_with_replacement", "compress", "count", "cycle",
             "dropwhile", "filterfalse", "groupby", "islice", "pairwise", "permutations", "product", "repeat",
             "starmap", "takewhile", "zip_longest")  # fmt: skip
#: Longest tuple one item may be (``product(..., repeat=r)``, ``combinations(x, r)``): their
#: index arrays of ``r`` entries are allocated at once, in C.
MAX_TUPLE = 10_000
_SIZE_ARGUMENT = {"product": ("repeat", None), "permutations": ("r", 1), "combinations": ("r", 1),
                  "combinations_with_replacement": ("r", 1)}  # fmt: skip


class _Ticking:
    """An iterator that ticks before each item of the one it wraps."""

    __slots__ = ("_items", "_tick")

    def __init__(self, items: Iterator[Any], tick: Tick) -> None:
        self._items, self._tick = items, tick

    def __iter__(self) -> _Ticking:
        return self

    def __next__(self) -> Any:
        self._tick()
        return next(self._items)

    def __repr__(self) -> str:
        return "<itertools iterator>"


class _Function:
    """One ``itertools`` function whose iterators tick."""

    __slots__ = ("_function", "_tick")

    def __init__(self, function: Callable[..., Iterator[Any]], tick: Tick) -> None:
        self._function, self._tick = function, tick

    def __call__(self, *args: Any, **kwargs: Any) -> _Ticking:
        name = self._function.__name__
        if name in _SIZE_ARGUMENT:
            keyword, position = _SIZE_ARGUMENT[name]
            size = args[position] if position is not None and len(args) > position else kwargs.get(keyword)
            if isinstance(size, int) and size > MAX_TUPLE:
                raise ValueError(f"itertools.{name}() with {keyword}={size} is too large for the sandbox (at most {MAX_TUPLE})")
        return _Ticking(self._function(*args, **kwargs), self._tick)

    def __repr__(self) -> str:
        return f"<built-in function {self._function.__name__}>"


class _Chain(_Function):
    """``itertools.chain``, with ``chain.from_iterable``."""

    __slots__ = ()

    def from_iterable(self, iterables: Any) -> _Ticking:
        return _Ticking(_itertools.chain.from_iterable(iterables), self._tick)


def itertools_proxy(tick: Tick) -> SimpleNamespace:
    """The ``itertools`` of one execution, its iterators ticking ``tick`` per item."""
    functions = {name: _Function(getattr(_itertools, name), tick) for name in ITERTOOLS}
    functions["chain"] = _Chain(_itertools.chain, tick)
    return SimpleNamespace(**functions)
