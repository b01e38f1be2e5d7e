"""Replay shards: each batch task writes its rows for a dataset as one Parquet value per step.

The key ``replay/<dataset>/<shard>.parquet`` of the run's store is written whole (a reader never sees half a shard),
and writing the same shard name again replaces it, so a retried Dask task does not duplicate rows. Inside a
transaction (``txn``) the shard is staged instead and appears only when the driver commits it (see
:mod:`engine.storage.staging`). The write path reads nothing: no catalog, no listing.
"""

from __future__ import annotations

import io
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine.errors import StorageError
from engine.storage.catalog import DatasetSchema
from engine.storage.run_layout import RunLocation, replay_key, run_store
from engine.storage.shards import check_shard, shard_name
from engine.storage.staging import staged_key
from engine.storage.store import Store

__all__ = ["ReplayWriter", "shard_name"]


class ReplayWriter:
    """Write replay shards into one run (a plain value: it pickles into tasks).

    Args:
        run: the run's location (a path or URL) or its store.
        txn: the transaction the writes belong to; shards are then staged until it commits.
    """

    def __init__(self, run: RunLocation | Store, txn: int | None = None) -> None:
        self.run = run
        self.txn = txn

    def in_txn(self, txn: int) -> ReplayWriter:
        """A writer to the same run whose shards are staged in transaction ``txn``."""
        return ReplayWriter(self.run, txn=txn)

    def write_shard(self, schema: DatasetSchema, shard: str, rows: list[dict[str, Any]]) -> str | None:
        """Write ``rows`` as shard ``shard`` of ``schema``'s dataset, replacing any earlier version.

        Args:
            schema: the dataset's schema; rows are checked against it.
            shard: the shard name, e.g. from :func:`shard_name`; ``[A-Za-z0-9_.-]`` only.
            rows: one dict per row.

        Returns:
            The key written (the staged key inside a transaction), or ``None`` if ``rows`` is empty (nothing is
            written).

        Raises:
            StorageError: invalid shard name, rows that do not fit the schema, or a failed write.
        """
        return self.write_table(schema, shard, schema.to_table(rows)) if rows else None

    def write_table(self, schema: DatasetSchema, shard: str, table: pa.Table) -> str:
        """Write an Arrow ``table`` as shard ``shard`` of ``schema``'s dataset (columnar data too large for rows of
        dicts: a network's edges); its columns are cast to the schema's.

        Raises:
            StorageError: invalid shard name, columns that do not fit the schema, or a failed write.
        """
        key = replay_key(schema.name, check_shard(shard))
        if self.txn is not None:
            key = staged_key(key, self.txn)
        try:
            table = table.select(schema.arrow_schema().names).cast(schema.arrow_schema())
        except (KeyError, pa.ArrowInvalid, ValueError) as error:
            raise StorageError(f"shard {shard!r} does not fit the {schema.name} dataset: {error}") from error
        buffer = io.BytesIO()
        pq.write_table(table, buffer)
        run_store(self.run).set(key, buffer.getvalue())
        return key
