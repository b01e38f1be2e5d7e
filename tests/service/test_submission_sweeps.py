"""Sweeps in the Submitter: each cell queues for a slot of the fair queue as its owner; the sweep itself holds none."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from engine.run_progress import RunProgress
from engine.society.run.runner import RunSummary
from engine.spec import ExperimentSpec, parse_spec
from service.admission.auth import Principal
from service.registry import ExperimentRegistry
from service.submission import Submitter


class FakeSweep:
    """A run function of ``run_sweep_as_run``'s shape: ``cells`` cells, ``lanes`` at a time, each inside ``cell_slot``.

    A cell runs until :meth:`finish` lets one go; ``started`` lists the cells that got a slot.
    """

    def __init__(self, cells: int, lanes: int = 2) -> None:
        self.cells, self.lanes = cells, lanes
        self.started: list[int] = []
        self.running = 0
        self._done = asyncio.Semaphore(0)

    def finish(self, n: int = 1) -> None:
        for _ in range(n):
            self._done.release()

    async def __call__(self, spec: ExperimentSpec, run_dir: Path, client: Any, *, on_progress: Any = None,
                       cell_slot: Any = None, **options: Any) -> RunSummary:
        if spec.sweep is None:  # an ordinary experiment: one tick, done
            on_progress(RunProgress("running", 1, 1, 1, 1))
            return RunSummary("completed", run_dir, 1, 1, 0, 0, 0, 0.0, None)
        todo = iter(range(self.cells))

        async def lane() -> None:
            for index in todo:
                async with cell_slot(SimpleNamespace(cell_id=f"cell-{index:04d}", index=index)):
                    self.started.append(index)
                    self.running += 1
                    try:
                        await self._done.acquire()
                    finally:
                        self.running -= 1

        await asyncio.gather(*(lane() for _ in range(self.lanes)))
        return RunSummary("completed", run_dir, self.cells, self.cells, 0, 0, 0, 0.0, None)


@pytest.fixture
def sweep_spec(make_spec_data: Callable[..., dict[str, Any]]) -> ExperimentSpec:
    data = make_spec_data("sweep")
    data["sweep"] = {"replications": 10_000}
    return parse_spec(data)


@pytest.fixture
def run_spec(make_spec_data: Callable[..., dict[str, Any]]) -> ExperimentSpec:
    return parse_spec(make_spec_data("one-tick"))


async def _until(predicate: Callable[[], bool], timeout: float = 60.0) -> None:  # only bounds a hang
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


def _owner(name: str) -> Principal:
    return Principal(owner=name, role="user")


async def test_a_sweeps_cells_take_slots_as_its_owner_and_another_owner_gets_the_next_free_one(
    tmp_path: Path, sweep_spec: ExperimentSpec, run_spec: ExperimentSpec
) -> None:
    registry = ExperimentRegistry(tmp_path)
    fake = FakeSweep(cells=10_000, lanes=4)
    submitter = Submitter(registry, client=object(), run=fake, max_running=2, max_concurrent=lambda owner: 2)
    sweep = registry.create(sweep_spec, owner="lab-a")
    submitter.submit(sweep, sweep_spec)
    assert registry.get(sweep.id).status == "queued"  # until a cell has a slot
    await _until(lambda: fake.running == 2)
    assert registry.get(sweep.id).status == "running"
    assert submitter.queued() == []  # cells waiting for a slot are not experiments
    assert len(submitter.queue) == 2  # the two lanes past the owner's two slots wait, not 10,000 cells

    other = registry.create(run_spec, owner="lab-b")
    submitter.submit(other, run_spec)
    await asyncio.sleep(0.05)
    assert registry.get(other.id).status == "queued"  # both slots are lab-a's cells
    fake.finish()  # a cell ends: the free slot is lab-b's, served less recently than lab-a
    await _until(lambda: registry.get(other.id).status == "completed")
    await _until(lambda: fake.running == 2)
    assert fake.started == [0, 1, 2]  # lab-a got the slot back once lab-b's run ended
    submitter.cancel(sweep.id)
    await _until(lambda: registry.get(sweep.id).status == "cancelled")
    assert len(submitter.queue) == 0 and submitter.queue.running() == [] and submitter.active() == []


async def test_a_sweep_cancelled_while_every_cell_waits_ends_cancelled_and_frees_the_queue(
    tmp_path: Path, sweep_spec: ExperimentSpec, run_spec: ExperimentSpec
) -> None:
    registry = ExperimentRegistry(tmp_path)
    blocker = asyncio.Event()

    async def run(spec: ExperimentSpec, run_dir: Path, client: Any, **options: Any) -> Any:
        if spec.sweep is None:
            await blocker.wait()
            return RunSummary("completed", run_dir, 1, 1, 0, 0, 0, 0.0, None)
        return await FakeSweep(cells=10_000)(spec, run_dir, client, **options)

    submitter = Submitter(registry, client=object(), run=run, max_running=1)
    first = registry.create(run_spec, owner="lab-b")
    submitter.submit(first, run_spec)  # holds the only slot
    sweep = registry.create(sweep_spec, owner="lab-a")
    submitter.submit(sweep, sweep_spec)
    await _until(lambda: len(submitter.queue) == 2)  # the sweep's two lanes wait for a slot
    submitter.cancel(sweep.id)
    assert registry.get(sweep.id).cancel_requested  # on disk before the task has unwound
    await _until(lambda: registry.get(sweep.id).status == "cancelled")
    assert registry.get(sweep.id).started_at is None and len(submitter.queue) == 0
    blocker.set()
    await _until(lambda: registry.get(first.id).status == "completed")
    assert ExperimentRegistry(tmp_path).get(sweep.id).status == "cancelled"


async def test_shutdown_interrupts_a_sweep_and_adopt_resumes_it(tmp_path: Path, sweep_spec: ExperimentSpec) -> None:
    registry = ExperimentRegistry(tmp_path)
    fake = FakeSweep(cells=3)
    submitter = Submitter(registry, client=object(), run=fake, max_running=2)
    sweep = registry.create(sweep_spec, owner="lab-a")
    submitter.submit(sweep, sweep_spec)
    await _until(lambda: fake.running == 2)
    await submitter.shutdown()
    assert registry.get(sweep.id).status == "interrupted" and registry.get(sweep.id).resume_on_start

    reloaded = ExperimentRegistry(tmp_path)
    assert reloaded.get(sweep.id).status == "queued"
    again = FakeSweep(cells=3)
    later = Submitter(reloaded, client=object(), run=again, max_running=2)
    assert later.adopt() == [sweep.id]
    again.finish(3)
    await _until(lambda: reloaded.get(sweep.id).status == "completed")
