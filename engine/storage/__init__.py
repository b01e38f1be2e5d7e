"""Replay storage: the store interface, atomic files, dataset schemas and their catalog, Parquet shards, the DuckDB reader.

Writers (batch tasks on Dask workers) use :class:`ReplayWriter`; readers (CLI, service) use
:class:`ReplayReader`. The reader is imported lazily so that writing never loads DuckDB.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.storage.atomic import (
    atomic_write_bytes,
    atomic_write_json,
    atomic_write_text,
    atomic_writer,
    read_json,
)
from engine.storage.catalog import Catalog, Column, ColumnType, DatasetKind, DatasetSchema
from engine.storage.replay import ReplayWriter
from engine.storage.shards import check_shard, shard_name
from engine.storage.store import FsspecStore, LocalStore, MemoryStore, Store, check_store, open_store
from engine.storage.text_table import format_table

if TYPE_CHECKING:
    from engine.storage.reader import ReplayReader

__all__ = [
    "Catalog",
    "Column",
    "ColumnType",
    "DatasetKind",
    "DatasetSchema",
    "FsspecStore",
    "LocalStore",
    "MemoryStore",
    "ReplayReader",
    "ReplayWriter",
    "Store",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "atomic_writer",
    "check_shard",
    "check_store",
    "format_table",
    "open_store",
    "read_json",
    "shard_name",
]


def __getattr__(name: str) -> Any:
    if name == "ReplayReader":
        from engine.storage.reader import ReplayReader

        return ReplayReader
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
