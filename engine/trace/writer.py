"""Trace shards: finished spans written as the run's key ``trace/<shard>.jsonl``, one span per line.

Writes are whole and a shard name written again is replaced, as with replay shards, so a retried
Dask task does not duplicate spans.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from engine.storage.run_layout import RunLocation, run_store, trace_key
from engine.storage.shards import check_shard, shard_name
from engine.storage.staging import staged_key
from engine.storage.store import Store
from engine.trace.spans import Span, new_trace_id

__all__ = ["read_trace_shard", "write_tick_span", "write_trace_shard"]


def write_trace_shard(run: RunLocation | Store, shard: str, spans: list[Span], *, txn: int | None = None) -> str | None:
    """Write ``spans`` as one JSONL shard, replacing any earlier shard of that name.

    Args:
        run: the run's location or store.
        shard: the shard name (``[A-Za-z0-9_.-]``), e.g. from :func:`engine.storage.shard_name`.
        spans: the spans to write.
        txn: stage the shard in this transaction (see :mod:`engine.storage.staging`).

    Returns:
        The key written (staged inside a transaction), or ``None`` if ``spans`` is empty.

    Raises:
        StorageError: an invalid shard name or a failed write.
    """
    key = trace_key(check_shard(shard))
    if txn is not None:
        key = staged_key(key, txn)
    if not spans:
        return None
    lines = [json.dumps(s.to_dict(), default=str, ensure_ascii=False, sort_keys=True) for s in spans]
    run_store(run).set(key, ("\n".join(lines) + "\n").encode("utf-8"))
    return key


def read_trace_shard(run: RunLocation | Store, key: str) -> list[Span]:
    """Read the spans of the JSONL shard ``key`` of a run (for tests and tools; SQL readers use the ``spans`` view)."""
    lines = run_store(run).get(key).decode("utf-8").splitlines()
    return [Span.from_dict(json.loads(line)) for line in lines if line.strip()]


def write_tick_span(run: RunLocation | Store, step: int, start_unix_ms: float, duration_s: float, **attrs: Any) -> str | None:
    """Write the driver's ``tick`` span of committed step ``step`` as shard ``step_<step>-part_tick``.

    The driver times a tick around its whole transaction (env recoveries and the commit included), so the
    span is written once the tick has committed, outside it; a re-run tick replaces its shard.

    Args:
        run: the run's location or store.
        step: the step (tick) number, also the span's ``step`` attribute.
        start_unix_ms: when the tick started, ms since the Unix epoch.
        duration_s: how long it took, in seconds.
        **attrs: further attributes.

    Returns:
        The shard's key.
    """
    span = Span(trace_id=new_trace_id(), span_id=uuid.uuid4().hex[:16], parent_id=None, name="tick",
                start_unix_ms=start_unix_ms, duration_ms=duration_s * 1000, status="ok", attrs={"step": step, **attrs})
    return write_trace_shard(run, shard_name(step, "tick"), [span])
