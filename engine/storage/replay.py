"""Replay shards: each batch task writes its rows for a dataset as one Parquet file per step.

``<replay_dir>/<dataset>/<shard>.parquet`` is written atomically (temp file, fsync, rename), so a
reader never sees half a shard, and writing the same shard name again replaces it, so a retried
Dask task does not duplicate rows. Inside a transaction (``txn``) the shard is staged instead and
appears only when the driver commits it (see :mod:`engine.storage.staging`). The write path reads
nothing: no catalog, no directory listing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from engine.storage.atomic import atomic_writer
from engine.storage.catalog import DatasetSchema
from engine.storage.shards import check_shard, shard_name
from engine.storage.staging import staged_path

__all__ = ["ReplayWriter", "shard_name"]


class ReplayWriter:
    """Write replay shards under one run's replay directory (a plain value: it pickles into tasks).

    Args:
        replay_dir: the run's ``replay`` directory; created on first write.
        txn: the transaction the writes belong to; shards are then staged until it commits.
    """

    def __init__(self, replay_dir: Path, txn: int | None = None) -> None:
        self.replay_dir = Path(replay_dir)
        self.txn = txn

    def in_txn(self, txn: int) -> ReplayWriter:
        """A writer to the same directory whose shards are staged in transaction ``txn``."""
        return ReplayWriter(self.replay_dir, txn=txn)

    def shard_path(self, dataset: str, shard: str) -> Path:
        """Return where shard ``shard`` of ``dataset`` lives.

        Raises:
            StorageError: ``shard`` is not a valid shard name.
        """
        return self.replay_dir / dataset / f"{check_shard(shard)}.parquet"

    def write_shard(self, schema: DatasetSchema, shard: str, rows: list[dict[str, Any]]) -> Path | None:
        """Write ``rows`` as shard ``shard`` of ``schema``'s dataset, replacing any earlier version.

        Args:
            schema: the dataset's schema; rows are checked against it.
            shard: the shard name, e.g. from :func:`shard_name`; ``[A-Za-z0-9_.-]`` only.
            rows: one dict per row.

        Returns:
            The path written (the staged path inside a transaction), or ``None`` if ``rows`` is
            empty (nothing is written).

        Raises:
            StorageError: invalid shard name, rows that do not fit the schema, or a failed write.
        """
        path = self.shard_path(schema.name, shard)
        if self.txn is not None:
            path = staged_path(path, self.txn)
        if not rows:
            return None
        table = schema.to_table(rows)
        with atomic_writer(path) as fh:
            pq.write_table(table, fh)
        return path
