"""Dataset schemas and the run's catalog of them (``replay/_schema.json``).

A :class:`DatasetSchema` turns rows (plain dicts) into an Arrow table with a fixed schema and
refuses rows that do not fit. The :class:`Catalog` records which datasets a run has, so a reader
can describe and query them even before their first shard lands.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import numbers
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine.errors import StorageError
from engine.storage.store import LocalStore, Store

__all__ = [
    "RESERVED_NAMES", "RUN_COLUMN", "SCHEMA_FILE", "Catalog", "Column", "ColumnType", "DatasetKind", "DatasetSchema", "with_run",
]

#: The catalog file inside a replay directory.
SCHEMA_FILE = "_schema.json"
#: View names the reader defines itself; no dataset may take them.
RESERVED_NAMES = frozenset({"spans"})

ColumnType = Literal["int64", "float64", "string", "bool", "timestamp", "json", "list<string>"]
DatasetKind = Literal["agent", "env", "llm", "society", "questionnaire", "survey"]

_ARROW_TYPES: dict[str, pa.DataType] = {
    "int64": pa.int64(),
    "float64": pa.float64(),
    "string": pa.string(),
    "bool": pa.bool_(),
    "timestamp": pa.timestamp("us"),
    "json": pa.string(),
    "list<string>": pa.list_(pa.string()),
}


def _is_int(v: Any) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _is_float(v: Any) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _is_str_list(v: Any) -> bool:
    return isinstance(v, list | tuple) and all(isinstance(x, str) for x in v)


# Arrow alone would quietly truncate 1.5 into an int64 column or split "ab" into ["a", "b"];
# these checks reject such values before conversion. ``bool`` is left to Arrow, which is strict.
_VALUE_CHECKS: dict[str, Callable[[Any], bool]] = {
    "int64": _is_int,
    "float64": _is_float,
    "string": lambda v: isinstance(v, str),
    "timestamp": lambda v: isinstance(v, dt.datetime),
    "list<string>": _is_str_list,
}


#: Per column type, the value types that pass its check without one: a column made of only these is checked by the set
#: of its values' types (a C-speed pass), not value by value.
_PLAIN_TYPES: dict[str, frozenset[type]] = {
    "int64": frozenset({int, type(None)}),
    "float64": frozenset({float, int, type(None)}),
    "string": frozenset({str, type(None)}),
    "timestamp": frozenset({dt.datetime, type(None)}),
}


class Column(BaseModel):
    """One column of a dataset."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Column name as it appears in SQL.
    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    #: Storage type; ``json`` is a string column holding JSON text.
    type: ColumnType
    #: What the column means, for people writing queries.
    description: str = ""


#: The first column of every dataset a run writes: the driver session (run id) that committed the row, so a
#: resumed run's or a fork's datasets show which driver wrote what (a fork's inherited rows name its parent's).
RUN_COLUMN = Column(name="run", type="string", description="run id")


class DatasetSchema(BaseModel):
    """A dataset's name, kind and columns; converts rows to Arrow."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    #: Dataset (and SQL view) name: lowercase, since SQL identifiers ignore case.
    name: str = Field(pattern=r"^[a-z_][a-z0-9_]{0,62}$")
    #: Which part of the simulation writes it.
    kind: DatasetKind
    #: What one row means.
    description: str = ""
    #: The columns, in order.
    columns: tuple[Column, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _check_names(self) -> DatasetSchema:
        if self.name in RESERVED_NAMES:
            raise ValueError(f"dataset name {self.name!r} is reserved")
        names = [c.name.lower() for c in self.columns]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise ValueError(f"dataset {self.name!r} has duplicate columns: {', '.join(dupes)}")
        return self

    def arrow_schema(self) -> pa.Schema:
        """Return the Arrow schema shards of this dataset are written with."""
        return pa.schema([pa.field(c.name, _ARROW_TYPES[c.type], nullable=True) for c in self.columns])

    def to_table(self, rows: list[dict[str, Any]]) -> pa.Table:
        """Convert rows to an Arrow table with this schema.

        Missing keys and ``None`` become nulls. ``json`` values are encoded with
        ``json.dumps(value, default=str, sort_keys=True)``. Timezone-aware timestamps are stored
        as naive UTC.

        Args:
            rows: one dict per row.

        Returns:
            A table whose schema is :meth:`arrow_schema`.

        Raises:
            StorageError: a row has keys that are not columns, or a value does not fit its column.
        """
        known = {c.name for c in self.columns}
        unknown: set[str] = set()
        for row in rows:
            if not known.issuperset(row):
                unknown.update(k for k in row if k not in known)
        if unknown:
            raise StorageError(f"dataset {self.name!r}: unknown columns {sorted(map(str, unknown))}")
        arrays = [self._column_array(c, [row.get(c.name) for row in rows]) for c in self.columns]
        return pa.Table.from_arrays(arrays, schema=self.arrow_schema())

    def _column_array(self, column: Column, values: list[Any]) -> pa.Array:
        if column.type == "json":
            values = [None if v is None else json.dumps(v, default=str, sort_keys=True) for v in values]
        check = _VALUE_CHECKS.get(column.type)
        plain = _PLAIN_TYPES.get(column.type)
        if check is not None and (plain is None or not plain.issuperset(map(type, values))):
            for i, v in enumerate(values):
                if v is not None and not check(v):
                    raise self._mismatch(column, i, v)
        try:
            return pa.array(values, type=_ARROW_TYPES[column.type])
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
            raise StorageError(f"dataset {self.name!r}, column {column.name!r} ({column.type}): {exc}") from exc

    def _mismatch(self, column: Column, index: int, value: Any) -> StorageError:
        return StorageError(
            f"dataset {self.name!r}, column {column.name!r}: expected {column.type}, "
            f"got {type(value).__name__} {value!r:.80} in row {index}"
        )

    def catalog_entry(self) -> dict[str, Any]:
        """Return this schema in the ``_schema.json`` entry format (without the name)."""
        return {
            "kind": self.kind,
            "description": self.description,
            "columns": [c.model_dump() for c in self.columns],
        }

    @classmethod
    def from_catalog_entry(cls, name: str, entry: dict[str, Any]) -> DatasetSchema:
        """Build a schema from a ``_schema.json`` entry.

        Raises:
            StorageError: the entry is malformed.
        """
        try:
            return cls.model_validate({"name": name, **entry})
        except ValidationError as exc:
            raise StorageError(f"catalog entry {name!r} is invalid: {exc}") from exc


def with_run(schema: DatasetSchema) -> DatasetSchema:
    """``schema`` with :data:`RUN_COLUMN` first (unchanged when it is already first).

    The engine adds the column to datasets whose rows it stamps itself (env modules' own datasets),
    so a module declares only what it knows.

    Raises:
        StorageError: ``schema`` declares a ``run`` column of its own (elsewhere or of another kind).
    """
    if schema.columns[0] == RUN_COLUMN:
        return schema
    if any(c.name.lower() == RUN_COLUMN.name for c in schema.columns):
        raise StorageError(f"dataset {schema.name!r} declares a 'run' column of its own; the engine adds it (run id)")
    return schema.model_copy(update={"columns": (RUN_COLUMN, *schema.columns)})


class Catalog:
    """The datasets of one run, kept in ``_schema.json`` of its replay directory.

    :meth:`register` is a read-modify-write of that one document. On a store with a local directory (a path, a
    :class:`~engine.storage.store.LocalStore`) it runs under an exclusive ``fcntl`` lock (``.schema.lock``), so
    concurrent writers never lose each other's entries. An object store has no such lock (nor a compare-and-swap
    the :class:`~engine.storage.store.Store` interface offers): there each writer re-reads the catalog after its
    write and writes again while an entry it wrote, or had read, is missing, which repairs a write that crossed
    another's. It cannot repair an entry written and checked entirely between another writer's read and that
    writer's write (a few milliseconds); the last writer then drops it. Register a run's datasets from one process
    (its driver) where that matters.

    Args:
        replay: the run's ``replay`` directory (a local path), or its store, e.g.
            ``run_store(location).child("replay")``.
    """

    def __init__(self, replay: Path | Store) -> None:
        #: Where ``_schema.json`` lives: the replay directory's store.
        self.store: Store = replay if isinstance(replay, Store) else LocalStore(replay, durable=True)

    @property
    def location(self) -> str:
        """The catalog document as a path or URL, for messages."""
        return f"{self.store.url.rstrip('/')}/{SCHEMA_FILE}"

    def load(self) -> dict[str, DatasetSchema]:
        """Return every registered dataset by name (empty if nothing is registered yet).

        Raises:
            StorageError: the catalog is unreadable or malformed.
        """
        doc = self.store.get_json(SCHEMA_FILE, default={"datasets": {}})
        datasets = doc.get("datasets") if isinstance(doc, dict) else None
        if not isinstance(datasets, dict):
            raise StorageError(f"{self.location} has no 'datasets' object")
        return {name: DatasetSchema.from_catalog_entry(name, entry) for name, entry in datasets.items()}

    def register(self, schema: DatasetSchema) -> None:
        """Add ``schema`` to the catalog; registering an identical schema again does nothing.

        A schema may grow: one that keeps every registered column (name and type, in order) and adds
        columns replaces the registered one, so a run written by an older engine can be resumed by a
        newer one. Shards written before read the added columns as NULL (the reader unions shards by
        column name).

        Args:
            schema: the dataset to record.

        Raises:
            StorageError: a different schema is already registered under the same name and ``schema``
                does not just add columns to it (no column is dropped, retyped or moved, the kind
                stays), the catalog cannot be read or written, or (a store without a local directory)
                other writers kept replacing the catalog through every round of write and check.
        """
        root = self.store.local_root
        if root is not None:
            with _locked(root):
                self._merge(schema, {})
            return
        kept: dict[str, DatasetSchema] = {}
        for attempt in range(_REGISTER_TRIES):
            if attempt:
                time.sleep(random.uniform(0.02, 0.2))  # let the crossing writer finish before trying again
            written = self._merge(schema, kept)
            if written is None:
                return
            # No lock here: another writer's read-modify-write may have crossed ours. Whatever we wrote (our entry,
            # and the ones we read) must still be there, else it is written again.
            current = self.load()
            kept = {name: s for name, s in written.items() if not _covers(current.get(name), s)}
            if not kept:
                return
        raise StorageError(
            f"cannot register dataset {schema.name!r} in {self.location}: other writers kept replacing the catalog"
        )

    def _merge(self, schema: DatasetSchema, kept: dict[str, DatasetSchema]) -> dict[str, DatasetSchema] | None:
        """Read the catalog, add ``schema`` and the ``kept`` entries a crossing writer dropped, and write it.

        Returns:
            The datasets written, or None when the catalog had them all already (nothing is written).

        Raises:
            StorageError: ``schema`` conflicts with the registered one, or a read or write failed.
        """
        current = self.load()
        changed = False
        for name, entry in kept.items():
            if not _covers(current.get(name), entry):
                current[name] = entry  # dropped, or replaced by the version it grew from
                changed = True
        existing = current.get(schema.name)
        if existing != schema:
            if existing is not None and not _grows(existing, schema) and not _reworded(existing, schema):
                raise StorageError(_conflict_message(existing, schema))
            current[schema.name] = schema
            changed = True
        if not changed:
            return None
        doc = {"datasets": {name: s.catalog_entry() for name, s in sorted(current.items())}}
        self.store.set_json(SCHEMA_FILE, doc, indent=2)
        return current


#: Rounds of write-and-check :meth:`Catalog.register` makes on a store without a local directory.
_REGISTER_TRIES = 5


@contextlib.contextmanager
def _locked(directory: Path) -> Iterator[None]:
    """Hold the exclusive lock of the catalog in ``directory`` (made if missing)."""
    # Read-modify-write: an exclusive lock keeps two processes from losing each other's entry.
    try:
        directory.mkdir(parents=True, exist_ok=True)
        lock = open(directory / ".schema.lock", "a")
    except OSError as exc:
        raise StorageError(f"cannot lock the catalog in {directory}: {exc}") from exc
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _covers(current: DatasetSchema | None, wanted: DatasetSchema) -> bool:
    """The registered ``current`` entry keeps ``wanted``: it is ``wanted``, or a schema grown from it."""
    return current is not None and (current == wanted or _grows(wanted, current))


def _grows(old: DatasetSchema, new: DatasetSchema) -> bool:
    """``new`` has every column of ``old`` (name and type, in the same order) and more, and the same kind."""
    if old.kind != new.kind or len(new.columns) <= len(old.columns):
        return False
    added = iter((c.name, c.type) for c in new.columns)
    return all((c.name, c.type) in added for c in old.columns)  # a subsequence: `in` advances the iterator


def _reworded(old: DatasetSchema, new: DatasetSchema) -> bool:
    """``new`` is ``old`` with other descriptions only (the same kind, and columns of the same names and types in the
    same order): a newer engine's words for the same data, which replace the stored ones."""
    return old.kind == new.kind and [(c.name, c.type) for c in old.columns] == [(c.name, c.type) for c in new.columns]


def _conflict_message(old: DatasetSchema, new: DatasetSchema) -> str:
    old_cols = {c.name: c for c in old.columns}
    new_cols = {c.name: c for c in new.columns}
    diffs = [f"+{n}" for n in new_cols if n not in old_cols]
    diffs += [f"-{n}" for n in old_cols if n not in new_cols]
    diffs += [
        f"{n}: {old_cols[n].type} -> {new_cols[n].type}"
        for n in new_cols
        if n in old_cols and old_cols[n].type != new_cols[n].type
    ]
    if not diffs:
        diffs = ["kind or column order differ"]
    return (
        f"dataset {new.name!r} is already registered with a different schema ({'; '.join(diffs)}); "
        "schemas cannot change within a run, only gain columns"
    )
