"""TraceHandle: where a task's spans go, as a handle that crosses process boundaries.

The handle is a run (where its trace shards go) plus the recorder that collects spans in the process using it.
Pickled (into a Dask task, inside a ServiceProxy) it carries the run only and arrives with an
empty recorder of its own: spans are recorded where they happen and written by the task that
recorded them, one shard per task, staged in its transaction like replay shards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.storage.run_layout import RunLocation
from engine.trace.spans import TraceRecorder
from engine.trace.writer import write_trace_shard

__all__ = ["TraceHandle"]


@dataclass(frozen=True)
class TraceHandle:
    """A run's trace and this process's recorder for it.

    Args:
        run: the run's location (its ``trace/`` keys get the shards); None records spans that are never written.
        recorder: where spans are collected (a fresh one by default; never pickled).
    """

    run: RunLocation | None = None
    recorder: TraceRecorder = field(default_factory=TraceRecorder, compare=False, repr=False)

    def __reduce__(self) -> tuple[Any, ...]:
        return (TraceHandle, (self.run,))

    def for_task(self) -> TraceHandle:
        """A handle to the same run with a recorder of its own (one per task, one shard per task)."""
        return TraceHandle(self.run)

    def write(self, shard: str, *, txn: int | None = None) -> str | None:
        """Write the spans recorded so far as shard ``shard`` (staged in ``txn``) and forget them.

        Returns:
            The key written, or None when nothing was recorded or there is no run.

        Raises:
            StorageError: an invalid shard name or a failed write.
        """
        spans = self.recorder.drain()
        return write_trace_shard(self.run, shard, spans, txn=txn) if self.run is not None else None
