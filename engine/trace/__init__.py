"""Tracing: sans-IO spans recorded in memory, and their JSONL shard writer.

Spans land in ``<run_dir>/trace/<shard>.jsonl`` and are queried through the ``spans`` view of
:class:`engine.storage.ReplayReader`. This package never loads DuckDB.
"""

from __future__ import annotations

from engine.trace.handle import TraceHandle
from engine.trace.spans import ActiveSpan, Span, SpanRef, SpanStatus, TraceRecorder, current_span, new_trace_id
from engine.trace.writer import read_trace_shard, write_tick_span, write_trace_shard

__all__ = [
    "ActiveSpan",
    "Span",
    "SpanRef",
    "SpanStatus",
    "TraceHandle",
    "TraceRecorder",
    "current_span",
    "new_trace_id",
    "read_trace_shard",
    "write_tick_span",
    "write_trace_shard",
]
