"""DiskLedger: an owner's disk use from per-run measurements, each stored byte counted once, no walk per submit."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from engine.spec import parse_spec
from service.admission.disk_usage import DiskLedger, run_bytes
from service.registry import ExperimentRecord, ExperimentRegistry


def _write(path: Path, size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"x" * size)
    return path


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class CountingMeasure:
    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, run_dir: Path | str) -> int:
        self.calls.append(Path(run_dir).name)
        return run_bytes(run_dir)


def _ended_run(registry: ExperimentRegistry, spec_data: dict[str, Any], owner: str, size: int) -> ExperimentRecord:
    record = registry.create(parse_spec(spec_data), owner=owner)
    _write(Path(record.run_dir) / "datasets" / "rows.parquet", size)
    return registry.update(record.id, status="completed")


def test_a_file_hard_linked_into_many_places_counts_once(tmp_path: Path) -> None:
    original = _write(tmp_path / "parent" / "history.bin", 30_000)
    for index in range(24):  # the report: one file counted once per link, 24-44 times
        link = tmp_path / f"fork{index}" / "history.bin"
        link.parent.mkdir()
        os.link(original, link)
    _write(tmp_path / "parent" / "own.bin", 1_000)

    shares = [run_bytes(tmp_path / name) for name in ["parent", *(f"fork{i}" for i in range(24))]]
    assert abs(sum(shares) - 31_000) <= 25  # each share is rounded to a byte
    assert shares[0] == 1_000 + 30_000 // 25
    assert run_bytes(tmp_path / "missing") == 0


def test_used_measures_a_finished_run_once_however_often_the_owner_submits(tmp_path: Path, make_spec_data) -> None:
    registry = ExperimentRegistry(tmp_path)
    measure = CountingMeasure()
    ledger = DiskLedger(registry, measure=measure)
    first = _ended_run(registry, make_spec_data("a"), "lab-a", 5_000)
    _ended_run(registry, make_spec_data("b"), "lab-b", 7_000)

    assert ledger.used("lab-a") == 5_000
    assert [ledger.used("lab-a") for _ in range(50)] == [5_000] * 50
    assert measure.calls == [first.id]  # one walk, and never of another owner's runs

    second = _ended_run(registry, make_spec_data("c"), "lab-a", 2_000)
    assert ledger.used("lab-a") == 7_000
    assert measure.calls == [first.id, second.id]  # only the run that ended since


def test_a_running_run_counts_as_last_refreshed_and_is_measured_again_when_it_ends(tmp_path: Path, make_spec_data) -> None:
    registry = ExperimentRegistry(tmp_path)
    measure = CountingMeasure()
    ledger = DiskLedger(registry, measure=measure)
    record = registry.create(parse_spec(make_spec_data()), owner="lab-a")
    registry.update(record.id, status="running")
    data = _write(Path(record.run_dir) / "a.bin", 1_000)

    assert ledger.used("lab-a") == 0  # not yet refreshed: a submit never walks a running run
    assert ledger.refresh() == 1
    assert ledger.used("lab-a") == 1_000
    _write(data.parent / "b.bin", 500)
    assert ledger.used("lab-a") == 1_000
    registry.update(record.id, status="completed")
    assert ledger.used("lab-a") == 1_500
    assert measure.calls == [record.id, record.id]


def test_refresh_reconciles_drift_after_the_interval_and_drops_deleted_experiments(tmp_path: Path, make_spec_data) -> None:
    registry = ExperimentRegistry(tmp_path)
    clock = Clock()
    ledger = DiskLedger(registry, reconcile_s=600, clock=clock)
    record = _ended_run(registry, make_spec_data(), "lab-a", 4_000)
    assert ledger.refresh() == 1
    _write(Path(record.run_dir) / "added-by-hand.bin", 6_000)  # drift the ledger cannot see

    clock.now = 599
    assert ledger.refresh() == 0
    assert ledger.used("lab-a") == 4_000
    clock.now = 600
    assert ledger.refresh() == 1
    assert ledger.used("lab-a") == 10_000

    registry.delete(record.id)
    ledger.refresh()
    assert ledger.used("lab-a") == 0
    assert ledger._entries == {} and ledger._totals == {"lab-a": 0}


def test_a_fork_and_its_parent_together_count_the_shared_past_once(tmp_path: Path, make_spec_data) -> None:
    registry = ExperimentRegistry(tmp_path)
    ledger = DiskLedger(registry)
    parent = _ended_run(registry, make_spec_data("parent"), "lab-a", 9_000)
    fork = registry.create(parse_spec(make_spec_data("fork")), owner="lab-a")
    os.makedirs(Path(fork.run_dir) / "datasets")
    os.link(Path(parent.run_dir) / "datasets" / "rows.parquet", Path(fork.run_dir) / "datasets" / "rows.parquet")
    registry.update(fork.id, status="completed")
    assert ledger.used("lab-a") == 9_000

