"""Datasets a run writes once, before its first step, from its spec alone: who the agents are, their respondents'
real answers, a calibration's fit, the network.

They are step-0 shards written whole and outside any transaction (nothing of a tick depends on them), the first
(``start-0000``) last: its presence says a dataset is all there, so a resumed run writes nothing again, and a fork
(a new run directory) writes its own.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from engine.storage.catalog import Catalog, DatasetSchema
from engine.storage.replay import ReplayWriter
from engine.storage.run_layout import REPLAY_DIR, RunLocation, replay_key, run_store
from engine.storage.shards import shard_name

__all__ = ["FIRST_SHARD", "has_start_shards", "write_start_shards"]

#: A start dataset's first shard: written last.
FIRST_SHARD = shard_name(0, "start-0000")


def has_start_shards(run_dir: RunLocation, schema: DatasetSchema) -> bool:
    """``run_dir`` holds ``schema``'s start shards, all of them."""
    return run_store(run_dir).exists(replay_key(schema.name, FIRST_SHARD))


def write_start_shards(run_dir: RunLocation, schema: DatasetSchema, shards: Sequence[pa.Table]) -> None:
    """Register ``schema`` and write ``shards`` as its step-0 shards, the first last (none: nothing is written)."""
    if not shards:
        return
    Catalog(run_store(run_dir).child(REPLAY_DIR)).register(schema)
    writer = ReplayWriter(run_dir)
    for number, table in reversed(list(enumerate(shards))):
        writer.write_table(schema, shard_name(0, f"start-{number:04d}"), table)
