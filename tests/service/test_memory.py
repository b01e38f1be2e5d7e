"""Freed memory is collected (reference cycles too) and handed back after a service's large allocations."""

from __future__ import annotations

import gc
import weakref

from service.memory import give_back_freed_memory


class _Node:
    def __init__(self) -> None:
        self.other: _Node | None = None


def test_garbage_in_a_reference_cycle_is_collected_at_once() -> None:
    gc.disable()  # as between the collector's own runs: only the call can collect it
    try:
        a, b = _Node(), _Node()
        a.other, b.other = b, a
        gone = weakref.ref(a)
        del a, b
        assert gone() is not None
        give_back_freed_memory()
        assert gone() is None
    finally:
        gc.enable()
