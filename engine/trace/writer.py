"""Trace shards: finished spans written as ``<trace_dir>/<shard>.jsonl``, one span per line.

Writes are atomic and a shard name written again is replaced, as with replay shards, so a retried
Dask task does not duplicate spans.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from engine.storage.atomic import atomic_write_text
from engine.storage.shards import check_shard, shard_name
from engine.storage.staging import staged_path
from engine.trace.spans import Span, new_trace_id

__all__ = ["read_trace_shard", "write_tick_span", "write_trace_shard"]


def write_trace_shard(trace_dir: Path, shard: str, spans: list[Span], *, txn: int | None = None) -> Path | None:
    """Write ``spans`` as one JSONL shard, replacing any earlier shard of that name.

    Args:
        trace_dir: the run's ``trace`` directory; created if missing.
        shard: the shard name (``[A-Za-z0-9_.-]``), e.g. from :func:`engine.storage.shard_name`.
        spans: the spans to write.
        txn: stage the shard in this transaction (see :mod:`engine.storage.staging`).

    Returns:
        The path written (staged inside a transaction), or ``None`` if ``spans`` is empty.

    Raises:
        StorageError: an invalid shard name or a failed write.
    """
    path = Path(trace_dir) / f"{check_shard(shard)}.jsonl"
    if txn is not None:
        path = staged_path(path, txn)
    if not spans:
        return None
    lines = [json.dumps(s.to_dict(), default=str, ensure_ascii=False, sort_keys=True) for s in spans]
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


def read_trace_shard(path: Path) -> list[Span]:
    """Read the spans of one JSONL shard (for tests and tools; SQL readers use the ``spans`` view)."""
    with open(path, encoding="utf-8") as fh:
        return [Span.from_dict(json.loads(line)) for line in fh if line.strip()]


def write_tick_span(trace_dir: Path, step: int, start_unix_ms: float, duration_s: float, **attrs: Any) -> Path | None:
    """Write the driver's ``tick`` span of committed step ``step`` as shard ``step_<step>-part_tick``.

    The driver times a tick around its whole transaction (env recoveries and the commit included), so the
    span is written once the tick has committed, outside it; a re-run tick replaces its shard.

    Args:
        trace_dir: the run's ``trace`` directory.
        step: the step (tick) number, also the span's ``step`` attribute.
        start_unix_ms: when the tick started, ms since the Unix epoch.
        duration_s: how long it took, in seconds.
        **attrs: further attributes.

    Returns:
        The shard's path.
    """
    span = Span(trace_id=new_trace_id(), span_id=uuid.uuid4().hex[:16], parent_id=None, name="tick",
                start_unix_ms=start_unix_ms, duration_ms=duration_s * 1000, status="ok", attrs={"step": step, **attrs})
    return write_trace_shard(trace_dir, shard_name(step, "tick"), [span])
