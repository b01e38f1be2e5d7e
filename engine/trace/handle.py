"""TraceHandle: where a task's spans go, as a handle that crosses process boundaries.

The handle is a trace directory plus the recorder that collects spans in the process using it.
Pickled (into a Dask task, inside a ServiceProxy) it carries the directory only and arrives with an
empty recorder of its own: spans are recorded where they happen and written by the task that
recorded them, one shard per task, staged in its transaction like replay shards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.trace.spans import TraceRecorder
from engine.trace.writer import write_trace_shard

__all__ = ["TraceHandle"]


@dataclass(frozen=True)
class TraceHandle:
    """A run's trace directory and this process's recorder for it.

    Args:
        trace_dir: the run's ``trace`` directory; None records spans that are never written.
        recorder: where spans are collected (a fresh one by default; never pickled).
    """

    trace_dir: Path | None = None
    recorder: TraceRecorder = field(default_factory=TraceRecorder, compare=False, repr=False)

    def __reduce__(self) -> tuple[Any, ...]:
        return (TraceHandle, (self.trace_dir,))

    def for_task(self) -> TraceHandle:
        """A handle to the same directory with a recorder of its own (one per task, one shard per task)."""
        return TraceHandle(self.trace_dir)

    def write(self, shard: str, *, txn: int | None = None) -> Path | None:
        """Write the spans recorded so far as shard ``shard`` (staged in ``txn``) and forget them.

        Returns:
            The path written, or None when nothing was recorded or there is no directory.

        Raises:
            StorageError: an invalid shard name or a failed write.
        """
        spans = self.recorder.drain()
        return write_trace_shard(self.trace_dir, shard, spans, txn=txn) if self.trace_dir is not None else None
