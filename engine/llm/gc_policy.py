"""The garbage collector's thresholds for a process that keeps hundreds of LLM calls in flight.

Hundreds of calls in flight keep tens of thousands of container objects alive (coroutines and
their frames, tasks, contexts, timer handles, pooled-connection buffers), almost none of them in
reference cycles. With CPython's default thresholds (700, 10, 10) the collector traverses them
again and again: measured 2026-12-02 in ``benchmarks/llm_saturation.py``'s client (1,000 callers,
256 calls in flight over HTTP, 15 s), 974 young, 88 middle and 8 full collections took 3.6 s of
the client's time, and each full one (about 150,000 objects) stalled the event loop for 150-190
ms, holding back every answer due then. A first generation of 10,000 left 17 young collections
and one middle one (0.4 s in all, none full), and the run answered 1,068 calls/s instead of 873,
side by side on the same machine (with the collector off: 1,121). Agent batches keep as many
coroutines alive, on the in-process simulated LLM too: ``benchmarks/tick_overhead.py`` (1,000
agents) measured 217 and 235 warm agent-steps/s against 200 and 219 without, runs alternated.

Only the first generation's threshold changes, and only upward: cyclic garbage is still
collected, a little later, and a process that set a higher one keeps it.
"""

from __future__ import annotations

import gc

__all__ = ["YOUNG_THRESHOLD", "relax_gc"]

#: Allocations (net of frees) of container objects between two young collections.
YOUNG_THRESHOLD = 10_000


def relax_gc() -> tuple[int, int, int]:
    """Raise the young generation's threshold to at least :data:`YOUNG_THRESHOLD` (calling again
    changes nothing).

    Returns:
        The thresholds now in force.
    """
    young, middle, old = gc.get_threshold()
    if young < YOUNG_THRESHOLD:
        gc.set_threshold(YOUNG_THRESHOLD, middle, old)
    return gc.get_threshold()
