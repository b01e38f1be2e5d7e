"""A run's datasets: the catalogue with row counts and columns, and one dataset as a single Parquet file.

Reads go through the engine's read-only ``ReplayReader``, which decides what a committed shard is.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from engine.errors import DatasetNotFoundError
from engine.results.models import ColumnInfo, DatasetInfo
from engine.storage.query_limits import QueryLimits
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import REPLAY_DIR, run_store
from engine.storage.sweep_layout import SWEEP_FILE

__all__ = ["DATASET_NAME", "check_dataset_name", "export_dataset", "list_datasets"]

logger = logging.getLogger(__name__)

#: A dataset name as the engine allows it; checked before any path is built from it.
DATASET_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")


def check_dataset_name(experiment_id: str, name: str) -> str:
    """Return ``name`` if it can be a dataset name.

    Raises:
        DatasetNotFoundError: it cannot (no dataset could have that name).
    """
    if not DATASET_NAME.fullmatch(name):
        raise DatasetNotFoundError(experiment_id, name, "not a valid dataset name (letters, digits and _ only)")
    return name


def _has_results(run_dir: Path | str) -> bool:
    """A run that wrote replay data, or a sweep root."""
    if isinstance(run_dir, Path) and (run_dir / SWEEP_FILE).is_file():
        return True
    return run_store(run_dir).list_dir(REPLAY_DIR) != ([], [])


def list_datasets(run_dir: Path | str, limits: QueryLimits | None = None) -> list[DatasetInfo]:
    """Describe every catalogued dataset of a run, with its committed row count.

    Args:
        run_dir: the run directory; a run that has not written anything yet has no datasets.
        limits: the reader's query limits (the service's ``POLIS_QUERY_*``); None = the reader's defaults.

    Raises:
        StorageError: the catalog is malformed.
        QueryError: a dataset's shards cannot be read, or counting them ran past the limits.
    """
    if not _has_results(run_dir):
        return []
    with ReplayReader(run_dir, limits) as reader:
        infos = []
        for name in reader.datasets():
            schema = reader.schema(name)
            infos.append(
                DatasetInfo(
                    name=name,
                    kind=schema.kind,
                    description=schema.description,
                    rows=reader.count(name),
                    columns=[ColumnInfo(**column.model_dump()) for column in schema.columns],
                )
            )
        return infos


def export_dataset(experiment_id: str, run_dir: Path | str, name: str, dest: Path, limits: QueryLimits | None = None) -> int:
    """Write every committed row of one dataset to a single Parquet file.

    Args:
        experiment_id: the experiment, for error messages.
        run_dir: its run directory.
        name: the dataset.
        dest: the file to write.
        limits: the reader's query limits; a dataset larger than ``limits.memory_limit`` (as Arrow)
            cannot be exported in one piece.

    Returns:
        The number of rows written.

    Raises:
        DatasetNotFoundError: the name is invalid or the run has no such dataset.
        QueryError: the dataset's shards cannot be read, or reading them ran past the limits.
    """
    check_dataset_name(experiment_id, name)
    if not _has_results(run_dir):
        raise DatasetNotFoundError(experiment_id, name)
    with ReplayReader(run_dir, limits) as reader:
        if name not in reader.datasets():
            raise DatasetNotFoundError(experiment_id, name)
        schema = reader.schema(name)
        table = reader.query(f'SELECT * FROM "{name}"')
    try:
        # Give the file the dataset's declared column order and Arrow types, not DuckDB's; a sweep's
        # cell columns (cell, replication, seed, param_*) lead, as the reader puts them.
        declared = [column.name for column in schema.columns]
        extra = [n for n in table.column_names if n not in declared]
        target = pa.schema([table.schema.field(n) for n in extra] + list(schema.arrow_schema()))
        table = table.select(extra + declared).cast(target)
    except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as error:
        logger.warning("dataset %s of %s kept DuckDB's schema: %s", name, experiment_id, error)
    pq.write_table(table, dest)
    return int(table.num_rows)
