"""The CodeGen cache's traffic per env step: the ``codegen_cache`` replay dataset and its ledger.

A router counts its cache traffic from its own start (:class:`CacheStats`). The ledger turns that
into one row per env step (what happened since the previous row) and run totals. Both survive the
env actor being rebuilt from a committed snapshot: the snapshot carries the totals and what was
counted but not yet reported, and a rebuilt router counts from zero again.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from engine.env.routers.template_cache import CacheStats
from engine.storage.catalog import RUN_COLUMN, Column, DatasetSchema

__all__ = ["CODEGEN_CACHE", "CacheLedger"]

CODEGEN_CACHE = DatasetSchema(
    name="codegen_cache",
    kind="env",
    description="one row per env step: the CodeGen router's template cache traffic since the previous step",
    columns=(
        RUN_COLUMN,
        Column(name="step", type="int64", description="society step (1-based) that just ended"),
        Column(name="t", type="timestamp", description="simulated time at the end of the step"),
        Column(name="requests", type="int64", description="template-mode asks looked up in the cache"),
        Column(name="hits_exact", type="int64", description="asks answered by cached code of the identical template"),
        Column(name="hits_similar", type="int64", description="asks answered by cached code of a similar template"),
        Column(name="misses", type="int64", description="asks that found no cached code"),
        Column(name="generations", type="int64", description="code generations run (each makes one or more coder LLM calls)"),
        Column(name="errors", type="int64", description="generations without working code, plus cached code evicted after failing"),
        Column(name="uncacheable", type="int64", description="generations whose code wrote its caller's values as literals (not cached)"),
        Column(name="hit_rate", type="float64", description="cumulative share of requests answered from the cache, since the run began"),
    ),
)


class CacheLedger:
    """Per-step rows and run totals from a router's lifetime :class:`CacheStats`.

    Args:
        live: the router's counts (``TemplateCache.stats``, updated in place as it serves asks).
    """

    def __init__(self, live: CacheStats) -> None:
        self._live = live
        self._carried = CacheStats()  #: run totals when this router started (restored from a snapshot)
        self._reported = CacheStats()  #: run totals at the last row

    def totals(self) -> CacheStats:
        """The run's totals."""
        return self._carried + self._live

    def row(self, run: str, step: int, t: datetime) -> dict[str, Any]:
        """The ``codegen_cache`` row of ``step`` (run id ``run``): the traffic since the previous row."""
        totals = self.totals()
        delta, self._reported = totals - self._reported, totals
        counts = {k: v for k, v in delta.as_dict().items() if k != "hit_rate"}
        return {"run": run, "step": step, "t": t, **counts, "hit_rate": totals.hit_rate}

    def dump(self) -> dict[str, Any]:
        """What a snapshot keeps: the totals and the totals already reported."""
        return {"totals": self.totals().as_dict(), "reported": self._reported.as_dict()}

    def restore(self, saved: dict[str, Any]) -> None:
        """Continue from a snapshot's :meth:`dump` (the router has counted nothing yet)."""
        self._carried = CacheStats.from_dict(saved.get("totals", {})) - self._live
        self._reported = CacheStats.from_dict(saved.get("reported", {}))
