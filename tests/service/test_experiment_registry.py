"""ExperimentRegistry: records on disk, atomic writes, and what a restart finds."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from engine.spec import ExperimentSpec, parse_spec
from service.admission.auth import Principal
from service.errors import ExperimentBusyError, ExperimentNotFoundError, IdempotencyConflictError
from service.registry import ExperimentRegistry, Idempotency


@pytest.fixture
def make_spec(make_spec_data: Callable[..., dict[str, Any]]) -> Callable[..., ExperimentSpec]:
    return lambda name="registry-test": parse_spec(make_spec_data(name))


def test_create_persists_a_queued_record_with_its_run_dir(tmp_path: Path, make_spec) -> None:
    record = ExperimentRegistry(tmp_path).create(make_spec())
    assert record.status == "queued"
    assert len(record.id) == 12 and int(record.id, 16) >= 0
    assert record.run_dir == tmp_path / "runs" / record.id
    assert record.ticks_total == 2 and record.agent_steps_total == 8
    registry = ExperimentRegistry(tmp_path)
    assert registry.spec(record.id)["name"] == "registry-test" and len(registry.spec(record.id)["agents"]) == 4
    on_disk = json.loads((tmp_path / "experiments" / f"{record.id}.json").read_text())
    assert on_disk["id"] == record.id and on_disk["status"] == "queued" and "spec" not in on_disk


def test_agent_steps_total_counts_population_members(tmp_path: Path, make_spec_data) -> None:
    data = make_spec_data()
    data["population"] = [{"count": 6, "profile_template": {"name": "p{i}"}}]
    record = ExperimentRegistry(tmp_path).create(parse_spec(data))
    assert record.agent_steps_total == 2 * (4 + 6)


def test_update_is_persisted_and_survives_reload(tmp_path: Path, make_spec) -> None:
    registry = ExperimentRegistry(tmp_path)
    record = registry.create(make_spec())
    registry.update(record.id, status="completed", ticks_done=2, agent_steps_done=8, llm_calls=8)
    reloaded = ExperimentRegistry(tmp_path).get(record.id)
    assert reloaded.status == "completed"
    assert (reloaded.ticks_done, reloaded.agent_steps_done, reloaded.llm_calls) == (2, 8, 8)
    assert reloaded.created_at == record.created_at


def test_update_rejects_unknown_status(tmp_path: Path, make_spec) -> None:
    registry = ExperimentRegistry(tmp_path)
    record = registry.create(make_spec())
    with pytest.raises(ValueError):
        registry.update(record.id, status="exploded")
    assert registry.get(record.id).status == "queued"


def test_writes_leave_no_temp_files(tmp_path: Path, make_spec) -> None:
    registry = ExperimentRegistry(tmp_path)
    record = registry.create(make_spec())
    for tick in range(5):
        registry.update(record.id, ticks_done=tick)
    assert sorted(p.name for p in (tmp_path / "experiments").iterdir()) == [f"{record.id}.json", f"{record.id}.spec.json"]


def test_records_are_listed_newest_first(tmp_path: Path, make_spec) -> None:
    registry = ExperimentRegistry(tmp_path)
    ids = []
    for i in range(3):
        ids.append(registry.create(make_spec(f"exp-{i}")).id)
        time.sleep(0.002)
    assert [r.id for r in registry.records()] == ids[::-1]
    assert [r.id for r in ExperimentRegistry(tmp_path).records()] == ids[::-1]


def test_get_unknown_id_raises_not_found(tmp_path: Path) -> None:
    with pytest.raises(ExperimentNotFoundError, match="nope"):
        ExperimentRegistry(tmp_path).get("nope")


def test_reload_queues_a_record_left_running_again_and_counts_the_restart(tmp_path: Path, make_spec) -> None:
    registry = ExperimentRegistry(tmp_path)
    record = registry.create(make_spec())
    registry.update(record.id, status="running", ticks_done=1)
    reloaded = ExperimentRegistry(tmp_path).get(record.id)
    assert (reloaded.status, reloaded.ticks_done, reloaded.resumed_after_restart, reloaded.error) == ("queued", 1, 1, None)
    on_disk = json.loads((tmp_path / "experiments" / f"{record.id}.json").read_text())
    assert on_disk["status"] == "queued" and on_disk["resumed_after_restart"] == 1
    assert ExperimentRegistry(tmp_path).get(record.id).resumed_after_restart == 1  # queued now: not counted twice


def test_reload_keeps_a_queued_record_queued_without_counting_a_resume(tmp_path: Path, make_spec) -> None:
    record = ExperimentRegistry(tmp_path).create(make_spec())
    reloaded = ExperimentRegistry(tmp_path).get(record.id)
    assert (reloaded.status, reloaded.resumed_after_restart) == ("queued", 0)


def test_reload_resumes_an_experiment_interrupted_by_a_clean_shutdown_only_when_flagged(tmp_path: Path, make_spec) -> None:
    registry = ExperimentRegistry(tmp_path)
    flagged, plain = registry.create(make_spec("flagged")), registry.create(make_spec("plain"))
    registry.update(flagged.id, status="interrupted", resume_on_start=True, error="shut down", finished_at=flagged.created_at)
    registry.update(plain.id, status="interrupted", error="shut down")
    reloaded = ExperimentRegistry(tmp_path)
    again = reloaded.get(flagged.id)
    assert (again.status, again.resume_on_start, again.resumed_after_restart, again.finished_at, again.error) == (
        "queued", False, 1, None, None)
    assert reloaded.get(plain.id).status == "interrupted"


@pytest.mark.parametrize("left", ["queued", "running", "interrupted"])
def test_reload_ends_cancelled_what_a_cancel_was_asked_for_before_the_service_stopped(tmp_path: Path, make_spec, left: str) -> None:
    registry = ExperimentRegistry(tmp_path)
    record = registry.create(make_spec())
    registry.update(record.id, status=left, resume_on_start=left == "interrupted", cancel_requested=True)
    again = ExperimentRegistry(tmp_path).get(record.id)
    assert (again.status, again.resume_on_start, again.resumed_after_restart) == ("cancelled", False, 0)
    assert again.finished_at is not None and again.error is not None and "cancelled on request" in again.error
    assert ExperimentRegistry(tmp_path).get(record.id).status == "cancelled"  # and stays so


def test_delete_removes_the_record_and_the_run_dir(tmp_path: Path, make_spec) -> None:
    registry = ExperimentRegistry(tmp_path)
    record = registry.create(make_spec())
    registry.update(record.id, status="completed")
    (record.run_dir / "replay").mkdir(parents=True)
    (record.run_dir / "replay" / "x.parquet").write_bytes(b"x" * 1000)
    registry.delete(record.id)
    assert not record.run_dir.exists()
    assert not (tmp_path / "experiments" / f"{record.id}.json").exists()
    with pytest.raises(ExperimentNotFoundError):
        registry.delete(record.id)
    assert ExperimentRegistry(tmp_path).records() == []


@pytest.mark.parametrize("status", ["queued", "running"])
def test_delete_refuses_a_live_experiment(tmp_path: Path, make_spec, status: str) -> None:
    registry = ExperimentRegistry(tmp_path)
    record = registry.create(make_spec())
    registry.update(record.id, status=status)
    with pytest.raises(ExperimentBusyError, match=status):
        registry.delete(record.id)
    assert registry.get(record.id).status == status


def test_delete_of_another_owners_experiment_is_not_found(tmp_path: Path, make_spec) -> None:
    registry = ExperimentRegistry(tmp_path)
    record = registry.create(make_spec(), owner="lab-a")
    registry.update(record.id, status="completed")
    with pytest.raises(ExperimentNotFoundError):
        registry.delete(record.id, Principal(owner="lab-b", role="user"))
    assert registry.get(record.id).owner == "lab-a"


@pytest.mark.parametrize("status", ["completed", "failed", "cancelled"])
def test_reload_keeps_final_records_as_they_were(tmp_path: Path, make_spec, status: str) -> None:
    registry = ExperimentRegistry(tmp_path)
    record = registry.create(make_spec())
    registry.update(record.id, status=status, error=None)
    reloaded = ExperimentRegistry(tmp_path).get(record.id)
    assert reloaded.status == status and reloaded.error is None


def test_reload_skips_temp_leftovers_and_corrupt_records(tmp_path: Path, make_spec) -> None:
    record = ExperimentRegistry(tmp_path).create(make_spec())
    records_dir = tmp_path / "experiments"
    (records_dir / f".{record.id}.json.tmp-deadbeef").write_text("{half a rec")
    (records_dir / "broken.json").write_text("{not json")
    (records_dir / "alien.json").write_text(json.dumps({"id": "alien"}))
    assert [r.id for r in ExperimentRegistry(tmp_path).records()] == [record.id]


def test_the_registry_keeps_keys_across_a_restart_and_forgets_a_deleted_experiments(tmp_path: Path, make_spec) -> None:
    key = Idempotency(key="restart", body_sha256="a" * 64)
    record, created = ExperimentRegistry(tmp_path).create_once(make_spec(), "lab-a", key)
    assert created
    reloaded = ExperimentRegistry(tmp_path)
    assert reloaded.create_once(make_spec(), "lab-a", key) == (reloaded.get(record.id), False)
    with pytest.raises(IdempotencyConflictError):
        reloaded.submitted("lab-a", Idempotency(key="restart", body_sha256="b" * 64))
    assert reloaded.submitted("lab-b", key) is None


def test_a_named_tables_rows_are_kept_once_beside_the_spec_never_in_the_record_or_its_updates(tmp_path: Path) -> None:
    rows = [{"name": f"P{i}", "age": 20 + i % 60} for i in range(200_000)]
    spec = parse_spec({"name": "big-table", "population": [{"from": "people.csv", "rows": rows, "count": 2}],
                       "steps": [{"type": "run", "num_steps": 1}]})
    registry = ExperimentRegistry(tmp_path)
    record = registry.create(spec)
    for done in range(1, 6):  # what a run's progress writes
        registry.update(record.id, status="running", ticks_done=done)
    folder = tmp_path / "experiments"
    assert (folder / f"{record.id}.json").stat().st_size < 4_000
    assert (folder / f"{record.id}.spec.json").stat().st_size < 4_000
    assert "rows" not in registry.shown_spec(record.id)["population"][0]  # what GET /experiments/{id} shows
    rows_file = folder / f"{record.id}.rows-0.json"
    written = rows_file.stat().st_mtime_ns
    reloaded = ExperimentRegistry(tmp_path)
    assert parse_spec(reloaded.spec(record.id)) == spec  # the spec runs, resumes and forks as it was submitted
    reloaded.set_spec(record.id, spec.model_copy(update={"batch_size": 7}))
    assert rows_file.stat().st_mtime_ns == written  # the same table is not written again
    reloaded.update(record.id, status="completed")
    reloaded.delete(record.id)
    assert list(folder.iterdir()) == []


def test_a_record_of_an_earlier_version_with_its_spec_inside_is_split_on_load(tmp_path: Path, make_spec) -> None:
    record = ExperimentRegistry(tmp_path).create(make_spec())
    path = tmp_path / "experiments" / f"{record.id}.json"
    spec_path = tmp_path / "experiments" / f"{record.id}.spec.json"
    old = {**json.loads(path.read_text()), "spec": json.loads(spec_path.read_text())}
    spec_path.unlink()
    path.write_text(json.dumps(old))
    registry = ExperimentRegistry(tmp_path)
    assert registry.get(record.id).status == "queued" and registry.spec(record.id)["name"] == "registry-test"
    assert "spec" not in json.loads(path.read_text())
