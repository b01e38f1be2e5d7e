"""Trace shards: finished spans written as ``<trace_dir>/<shard>.jsonl``, one span per line.

Writes are atomic and a shard name written again is replaced, as with replay shards, so a retried
Dask task does not duplicate spans.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.storage.atomic import atomic_write_text
from engine.storage.shards import check_shard
from engine.storage.staging import staged_path
from engine.trace.spans import Span

__all__ = ["read_trace_shard", "write_trace_shard"]


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
