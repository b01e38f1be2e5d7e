"""Env modules' own datasets are recorded with ``run`` first: the module declares its columns, the actor stamps the run id."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest

from engine.env.actor import EnvRouterActor, EnvRouterConfig
from engine.env.base import EnvBase
from engine.env.control import EndTick
from engine.env.module_datasets import module_datasets
from engine.env.modules.messaging import MessagingSpace
from engine.env.registry import env_module_names, resolve_env_module
from engine.env.requests import EnvRequest
from engine.errors import StorageError
from engine.storage.catalog import RUN_COLUMN, Catalog, Column, DatasetSchema
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import run_store
from engine.storage.staging import commit_staged

START = datetime(2026, 1, 1, 8)


@pytest.mark.parametrize("name", env_module_names())
def test_every_builtin_module_dataset_is_recorded_with_run_first_then_the_declared_columns(name: str) -> None:
    module = resolve_env_module(name)
    declared = module.replay_datasets()
    recorded = module_datasets([module])
    assert [s.name for s in recorded] == [s.name for s in declared]
    for schema, original in zip(recorded, declared, strict=True):
        # a module writing a society dataset (network_edges) declares it as the society does, run first
        assert schema.columns == (RUN_COLUMN, *(c for c in original.columns if c != RUN_COLUMN))
        assert (schema.kind, schema.description) == (original.kind, original.description)


class _OwnRun(EnvBase):
    SCHEMA: ClassVar[DatasetSchema] = DatasetSchema(
        name="own_run", kind="env", columns=(Column(name="step", type="int64"), Column(name="run", type="string")),
    )

    @classmethod
    def replay_datasets(cls) -> list[DatasetSchema]:
        return [cls.SCHEMA]


def test_a_module_that_declares_run_itself_is_refused() -> None:
    with pytest.raises(StorageError, match="'own_run' declares a 'run' column of its own"):
        module_datasets([_OwnRun])


async def test_the_actor_stamps_each_module_row_with_the_run_id_of_its_step(tmp_path: Path) -> None:
    actor = EnvRouterActor(EnvRouterConfig(modules=(("MessagingSpace", {}),), run_dir=tmp_path))
    await actor.init(START, list(range(4)))
    for schema in module_datasets([MessagingSpace]):
        Catalog(tmp_path / "replay").register(schema)
    send: dict[str, Any] = {"agent_id": 1, "to_agent_id": 2, "content": "hi"}
    for step, run in ((1, "first-aaaaaa"), (2, "second-bbbbbb")):  # a resumed run: another driver, another id
        await actor.ask_many([EnvRequest("call_tool", 1, "send_message", arguments=send)])
        result = await actor.end_tick(EndTick(step, 600, START + timedelta(minutes=10 * step), step, run))
        commit_staged(run_store(tmp_path), result.staged)
    with ReplayReader(tmp_path) as reader:
        names = [s.name for s in MessagingSpace.replay_datasets()]
        runs = {name: reader.query(f"SELECT step, run FROM {name} ORDER BY step").to_pylist() for name in names}
        first_columns = {name: reader.query(f"SELECT * FROM {name} LIMIT 0").column_names[0] for name in names}
    for name in names:
        assert runs[name] == [{"step": 1, "run": "first-aaaaaa"}, {"step": 2, "run": "second-bbbbbb"}], name
        assert first_columns[name] == "run"
