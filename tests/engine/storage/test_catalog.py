"""Dataset schemas convert rows strictly; the catalog records them once per run."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pytest
from pydantic import ValidationError

from engine.errors import StorageError
from engine.storage.catalog import RUN_COLUMN, SCHEMA_FILE, Catalog, Column, DatasetSchema, with_run
from engine.storage.store import LocalStore, MemoryStore


@pytest.fixture
def schema() -> DatasetSchema:
    return DatasetSchema(
        name="agent_state",
        kind="agent",
        description="one row per agent per step",
        columns=(
            Column(name="step", type="int64", description="tick"),
            Column(name="agent_id", type="string"),
            Column(name="mood", type="float64"),
            Column(name="active", type="bool"),
            Column(name="at", type="timestamp"),
            Column(name="memory", type="json"),
            Column(name="tags", type="list<string>"),
        ),
    )


def test_arrow_schema_maps_every_column_type(schema: DatasetSchema) -> None:
    assert schema.arrow_schema() == pa.schema(
        [
            ("step", pa.int64()),
            ("agent_id", pa.string()),
            ("mood", pa.float64()),
            ("active", pa.bool_()),
            ("at", pa.timestamp("us")),
            ("memory", pa.string()),
            ("tags", pa.list_(pa.string())),
        ]
    )


def test_to_table_fills_missing_keys_with_null_and_encodes_json(schema: DatasetSchema) -> None:
    at = dt.datetime(2024, 1, 2, 3, 4, 5)
    table = schema.to_table(
        [
            {"step": 1, "agent_id": "a", "mood": 1, "memory": {"b": 1, "a": [1, 2]}, "tags": ["x"], "at": at},
            {"step": 2},
        ]
    )
    assert table.schema == schema.arrow_schema()
    rows = table.to_pylist()
    assert rows[0]["memory"] == '{"a": [1, 2], "b": 1}'
    assert rows[0]["mood"] == 1.0
    assert rows[0]["at"] == at
    assert rows[1] == {
        "step": 2,
        "agent_id": None,
        "mood": None,
        "active": None,
        "at": None,
        "memory": None,
        "tags": None,
    }


def test_to_table_stores_aware_timestamps_as_utc(schema: DatasetSchema) -> None:
    aware = dt.datetime(2024, 1, 1, 2, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    assert schema.to_table([{"at": aware}]).column("at")[0].as_py() == dt.datetime(2024, 1, 1, 0, 0)


def test_to_table_rejects_unknown_keys_naming_them(schema: DatasetSchema) -> None:
    with pytest.raises(StorageError, match=r"agent_state.*\['extra', 'zzz'\]"):
        schema.to_table([{"step": 1, "extra": 1}, {"zzz": 2}])


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("step", 1.5),
        ("step", True),
        ("step", "3"),
        ("mood", "high"),
        ("mood", False),
        ("agent_id", 7),
        ("active", 1),
        ("at", "2024-01-01"),
        ("tags", "ab"),
        ("tags", ["a", 1]),
    ],
)
def test_to_table_type_mismatch_names_dataset_and_column(schema: DatasetSchema, column: str, value: object) -> None:
    with pytest.raises(StorageError, match=rf"'agent_state'.*'{column}'"):
        schema.to_table([{column: value}])


def test_invalid_schemas_are_rejected() -> None:
    cols = (Column(name="x", type="int64"),)
    for bad_name in ["Agent", "1x", "a-b", "spans", ""]:
        with pytest.raises(ValidationError):
            DatasetSchema(name=bad_name, kind="agent", columns=cols)
    with pytest.raises(ValidationError, match="duplicate"):
        DatasetSchema(name="d", kind="env", columns=(*cols, Column(name="X", type="string")))
    with pytest.raises(ValidationError):
        Column(name="x", type="decimal")  # type: ignore[arg-type]


def test_register_writes_documented_format_and_merges(tmp_path: Path, schema: DatasetSchema) -> None:
    catalog = Catalog(tmp_path / "replay")
    assert catalog.load() == {}
    other = DatasetSchema(name="env_events", kind="env", columns=(Column(name="step", type="int64"),))
    catalog.register(schema)
    catalog.register(other)
    doc = json.loads((tmp_path / "replay" / SCHEMA_FILE).read_text())
    assert sorted(doc["datasets"]) == ["agent_state", "env_events"]
    assert doc["datasets"]["env_events"] == {
        "kind": "env",
        "description": "",
        "columns": [{"name": "step", "type": "int64", "description": ""}],
    }
    assert catalog.load() == {"agent_state": schema, "env_events": other}


def test_register_identical_schema_is_a_no_op(tmp_path: Path, schema: DatasetSchema) -> None:
    catalog = Catalog(tmp_path)
    catalog.register(schema)
    before = (tmp_path / SCHEMA_FILE).stat().st_mtime_ns
    catalog.register(schema.model_copy())
    assert (tmp_path / SCHEMA_FILE).stat().st_mtime_ns == before
    assert list(catalog.load()) == ["agent_state"]


def test_register_conflicting_schema_raises_clear_error(tmp_path: Path, schema: DatasetSchema) -> None:
    catalog = Catalog(tmp_path)
    catalog.register(schema)
    evolved = schema.model_copy(
        update={
            "columns": (*schema.columns[:1], Column(name="agent_id", type="int64"), Column(name="new", type="bool"))
        }
    )
    with pytest.raises(StorageError) as info:
        catalog.register(evolved)
    message = str(info.value)
    assert "'agent_state' is already registered with a different schema" in message
    assert "+new" in message and "agent_id: string -> int64" in message and "-mood" in message
    assert catalog.load()["agent_state"] == schema


def test_register_accepts_a_schema_that_only_adds_columns(tmp_path: Path, schema: DatasetSchema) -> None:
    catalog = Catalog(tmp_path)
    catalog.register(schema)
    grown = with_run(schema)  # what a newer engine registers when it resumes an older engine's run
    catalog.register(grown)
    assert catalog.load()["agent_state"] == grown
    with pytest.raises(StorageError, match=r"only gain columns"):
        catalog.register(schema)  # dropping the added column again is no growth
    moved = grown.model_copy(update={"columns": (*grown.columns[2:], *grown.columns[:2], Column(name="x", type="bool"))})
    with pytest.raises(StorageError, match="already registered with a different schema"):
        catalog.register(moved)  # every column kept and one added, but the order changed
    other_kind = with_run(schema.model_copy(update={"name": "env_state", "kind": "env"}))
    catalog.register(schema.model_copy(update={"name": "env_state", "kind": "agent"}))
    with pytest.raises(StorageError, match="already registered with a different schema"):
        catalog.register(other_kind)


def test_a_schema_with_other_descriptions_only_replaces_the_stored_words(tmp_path: Path, schema: DatasetSchema) -> None:
    catalog = Catalog(tmp_path)
    catalog.register(schema)
    reworded = schema.model_copy(update={"description": "newer words", "columns": (
        schema.columns[0].model_copy(update={"description": "newer words for the column"}), *schema.columns[1:])})
    catalog.register(reworded)  # what a newer engine registers when it resumes an older engine's run
    assert catalog.load()["agent_state"] == reworded
    with pytest.raises(StorageError, match="already registered with a different schema"):
        catalog.register(reworded.model_copy(update={"kind": "env"}))


def test_with_run_puts_the_run_column_first_once(schema: DatasetSchema) -> None:
    grown = with_run(schema)
    assert grown.columns == (RUN_COLUMN, *schema.columns) and (grown.name, grown.kind) == (schema.name, schema.kind)
    assert with_run(grown) is grown
    own = schema.model_copy(update={"columns": (*schema.columns, Column(name="Run", type="int64"))})
    with pytest.raises(StorageError, match="declares a 'run' column of its own"):
        with_run(own)


def test_malformed_catalog_is_a_storage_error(tmp_path: Path) -> None:
    (tmp_path / SCHEMA_FILE).write_text('{"datasets": {"x": {"kind": "nope", "columns": []}}}')
    with pytest.raises(StorageError, match="catalog entry 'x' is invalid"):
        Catalog(tmp_path).load()
    (tmp_path / SCHEMA_FILE).write_text("[]")
    with pytest.raises(StorageError, match="no 'datasets'"):
        Catalog(tmp_path).load()


# --- the catalog on a store ---


def test_catalog_on_a_memory_store_registers_without_a_lock(schema: DatasetSchema) -> None:
    store = MemoryStore()
    catalog = Catalog(store.child("replay"))
    assert catalog.load() == {}
    catalog.register(schema)
    catalog.register(schema.model_copy())
    assert store.list_prefix("") == ["replay/_schema.json"]  # no lock file on a store without a local directory
    assert catalog.load() == {"agent_state": schema}
    assert json.loads(store.get("replay/_schema.json"))["datasets"]["agent_state"] == schema.catalog_entry()
    with pytest.raises(StorageError, match="only gain columns"):
        catalog.register(schema.model_copy(update={"columns": schema.columns[:2]}))
    store.set("replay/_schema.json", b"[]")
    with pytest.raises(StorageError, match=r"replay/_schema.json has no 'datasets'"):
        catalog.load()


def test_a_path_and_a_local_store_are_the_same_locked_catalog(tmp_path: Path, schema: DatasetSchema) -> None:
    Catalog(LocalStore(tmp_path)).register(schema)
    assert (tmp_path / ".schema.lock").exists()
    assert Catalog(tmp_path).load() == {"agent_state": schema}
    assert Catalog(tmp_path).location == str(tmp_path / SCHEMA_FILE)


class CrossingStore(MemoryStore):
    """A memory store where another writer's stale catalog lands right after each of our first ``times`` writes of it."""

    def __init__(self, stale: dict[str, DatasetSchema], times: int) -> None:
        super().__init__()
        self.stale = json.dumps({"datasets": {n: s.catalog_entry() for n, s in stale.items()}}).encode()
        self.left = times
        self.writes = 0

    def set(self, key: str, value: bytes) -> None:
        super().set(key, value)
        if key == SCHEMA_FILE:
            self.writes += 1
            if self.left:
                self.left -= 1
                super().set(key, self.stale)


OTHER = DatasetSchema(name="other", kind="env", columns=(Column(name="x", type="int64"),))
ENV = DatasetSchema(name="env_events", kind="env", columns=(Column(name="step", type="int64"),))


def test_register_on_an_object_store_rewrites_an_entry_a_crossing_writer_dropped(schema: DatasetSchema) -> None:
    # The other writer read the catalog with ENV only and added OTHER; its write lands after ours.
    store = CrossingStore({"env_events": ENV, "other": OTHER}, times=1)
    MemoryStore.set(store, SCHEMA_FILE, json.dumps({"datasets": {"env_events": ENV.catalog_entry()}}).encode())
    Catalog(store).register(schema)
    assert Catalog(store).load() == {"agent_state": schema, "env_events": ENV, "other": OTHER}
    assert store.writes == 2


def test_register_on_an_object_store_restores_entries_it_had_read(schema: DatasetSchema) -> None:
    # The other writer read an empty catalog: its write drops ENV, which we read, as well as our own entry.
    store = CrossingStore({"other": OTHER}, times=2)
    MemoryStore.set(store, SCHEMA_FILE, json.dumps({"datasets": {"env_events": ENV.catalog_entry()}}).encode())
    Catalog(store).register(schema)
    assert Catalog(store).load() == {"agent_state": schema, "env_events": ENV, "other": OTHER}
    assert store.writes == 3


def test_register_on_an_object_store_keeps_a_grown_schema_over_a_stale_one(schema: DatasetSchema) -> None:
    store = CrossingStore({"agent_state": schema}, times=1)
    Catalog(store).register(schema)
    grown = with_run(schema)
    Catalog(store).register(grown)  # the first write of it is replaced by the schema it grew from, then restored
    assert Catalog(store).load() == {"agent_state": grown}


def test_register_on_an_object_store_gives_up_when_writers_keep_crossing(schema: DatasetSchema) -> None:
    store = CrossingStore({"other": OTHER}, times=100)
    with pytest.raises(StorageError, match="cannot register dataset 'agent_state' in .*other writers kept replacing"):
        Catalog(store).register(schema)
