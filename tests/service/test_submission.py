"""Submitter and ProgressRecorder, driven by a fake run function of run_experiment's shape."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

runner = pytest.importorskip("engine.society.run.runner", reason="engine/society/run/runner.py has not landed yet")

from engine.spec import BudgetSpec, ExperimentSpec, parse_spec  # noqa: E402
from service.errors import ExperimentBusyError, ExperimentNotFoundError, ExperimentNotRunningError  # noqa: E402
from service.registry import ExperimentRegistry  # noqa: E402
from service.schemas import ForkedFrom  # noqa: E402
from service.submission import ProgressRecorder, Submitter  # noqa: E402

RunProgress = runner.RunProgress
RunSummary = runner.RunSummary


class CountingRegistry(ExperimentRegistry):
    """A real registry that also remembers every update it was asked for."""

    def __init__(self, data_dir: Path) -> None:
        super().__init__(data_dir)
        self.updates: list[dict[str, Any]] = []

    def update(self, experiment_id: str, **changes: Any):
        self.updates.append(changes)
        return super().update(experiment_id, **changes)


def _progress(status: str, ticks_done: int, steps_done: int) -> Any:
    return RunProgress(status=status, ticks_done=ticks_done, ticks_total=2, agent_steps_done=steps_done, agent_steps_total=8)


def fake_run(*, summary_status: str = "completed", error: str | None = None, block: asyncio.Event | None = None):
    """A run function that reports one progress per tick, optionally blocks, then returns a summary."""

    async def run(spec: ExperimentSpec, run_dir: Path, client: Any, *, on_progress=None, experiment_id=None) -> Any:
        n_agents = len(spec.all_agents())
        on_progress(_progress("starting", 0, 0))
        for tick in range(1, spec.total_ticks() + 1):
            await asyncio.sleep(0)
            on_progress(_progress("running", tick, tick * n_agents))
            if block is not None:
                await block.wait()
        return RunSummary(
            status=summary_status,
            run_dir=run_dir,
            ticks_done=spec.total_ticks(),
            agent_steps=spec.total_ticks() * n_agents,
            llm_calls=8,
            input_tokens=800,
            output_tokens=160,
            duration_s=0.5,
            error=error,
        )

    return run


@pytest.fixture
def registry(tmp_path: Path) -> CountingRegistry:
    return CountingRegistry(tmp_path)


@pytest.fixture
def spec(make_spec_data: Callable[..., dict[str, Any]]) -> ExperimentSpec:
    return parse_spec(make_spec_data("submission-test"))


async def _settle(submitter: Submitter, timeout: float = 60.0) -> None:  # only bounds a hang
    async with asyncio.timeout(timeout):
        while submitter.active():
            await asyncio.sleep(0.01)


async def _until(predicate: Callable[[], bool], timeout: float = 60.0) -> None:  # only bounds a hang
    async with asyncio.timeout(timeout):
        while not predicate():
            await asyncio.sleep(0.01)


async def test_completed_run_records_summary_counts_and_usage(registry, spec) -> None:
    submitter = Submitter(registry, client=object(), run=fake_run())
    record = registry.create(spec)
    submitter.submit(record, spec)
    await _settle(submitter)
    done = registry.get(record.id)
    assert done.status == "completed" and done.error is None
    assert (done.ticks_done, done.ticks_total, done.agent_steps_done, done.agent_steps_total) == (2, 2, 8, 8)
    assert (done.llm_calls, done.input_tokens, done.output_tokens, done.duration_s) == (8, 800, 160, 0.5)
    assert done.started_at is not None and done.finished_at is not None
    assert ExperimentRegistry(registry._records_dir.parent).get(record.id).status == "completed"


async def test_failed_summary_keeps_the_runners_error(registry, spec) -> None:
    submitter = Submitter(registry, client=object(), run=fake_run(summary_status="failed", error="LLMCallError: 502"))
    record = registry.create(spec)
    submitter.submit(record, spec)
    await _settle(submitter)
    assert registry.get(record.id).status == "failed"
    assert registry.get(record.id).error == "LLMCallError: 502"


async def test_run_function_that_raises_marks_failed_never_running(registry, spec) -> None:
    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("bug in the runner")

    submitter = Submitter(registry, client=object(), run=broken)
    record = registry.create(spec)
    submitter.submit(record, spec)
    await _settle(submitter)
    failed = registry.get(record.id)
    assert failed.status == "failed"
    assert "RuntimeError: bug in the runner" in failed.error
    assert failed.finished_at is not None


@pytest.mark.parametrize("parent_gone", [False, True], ids=["parent-holds-no-run", "parent-deleted"])
async def test_a_fork_that_cannot_be_made_fails_saying_why_and_never_runs(registry, spec, parent_gone: bool) -> None:
    started: list[Path] = []

    async def run(spec: ExperimentSpec, run_dir: Path, client: Any, **options: Any) -> Any:
        started.append(run_dir)

    parent = registry.update(registry.create(spec).id, status="completed")
    fork = registry.create(spec, forked_from=ForkedFrom(experiment=parent.id, at_step=1))
    if parent_gone:
        registry.delete(parent.id)
    submitter = Submitter(registry, client=object(), run=run)
    submitter.submit(fork, spec, resume=True)
    await _settle(submitter)
    failed = registry.get(fork.id)
    assert failed.status == "failed" and failed.finished_at is not None
    assert failed.error is not None and failed.error.startswith("cannot make the fork: ")
    assert ("not found" if parent_gone else "holds no run") in failed.error
    assert started == []


async def test_shutdown_cancels_running_experiments_and_marks_them_interrupted(registry, spec) -> None:
    submitter = Submitter(registry, client=object(), run=fake_run(block=asyncio.Event()), progress_interval=0)
    record = registry.create(spec)
    submitter.submit(record, spec)
    await _until(lambda: registry.get(record.id).ticks_done == 1)
    assert registry.get(record.id).status == "running"
    await submitter.shutdown()
    stopped = registry.get(record.id)
    assert stopped.status == "interrupted"
    assert "shut down" in stopped.error
    assert stopped.ticks_done == 1 and stopped.finished_at is not None
    assert submitter.active() == []


async def test_cancel_marks_cancelled_and_a_second_cancel_is_refused(registry, spec) -> None:
    submitter = Submitter(registry, client=object(), run=fake_run(block=asyncio.Event()))
    record = registry.create(spec)
    submitter.submit(record, spec)
    await _until(lambda: registry.get(record.id).status == "running")
    submitter.cancel(record.id)
    await _settle(submitter)
    assert registry.get(record.id).status == "cancelled"
    with pytest.raises(ExperimentNotRunningError, match="cancelled"):
        submitter.cancel(record.id)
    with pytest.raises(ExperimentNotFoundError):
        submitter.cancel("nope")


async def test_cancel_before_the_task_starts_still_ends_cancelled(registry, spec) -> None:
    submitter = Submitter(registry, client=object(), run=fake_run())
    record = registry.create(spec)
    submitter.submit(record, spec)
    submitter.cancel(record.id)
    await _settle(submitter)
    assert registry.get(record.id).status == "cancelled"


def test_progress_writes_are_throttled_but_status_changes_always_written(registry, spec) -> None:
    record = registry.create(spec)
    now = [0.0]
    recorder = ProgressRecorder(registry, record.id, interval=0.5, clock=lambda: now[0])
    for t, status, ticks in [
        (0.0, "starting", 0),  # first report: written
        (0.1, "running", 0),  # status change: written
        (0.2, "running", 1),  # within 0.5 s of the last write: skipped
        (0.4, "running", 1),  # skipped
        (0.7, "running", 2),  # 0.6 s since the last write: written
        (0.8, "running", 2),  # skipped
    ]:
        now[0] = t
        recorder(_progress(status, ticks, ticks * 4))
    assert len(registry.updates) == 3
    assert registry.get(record.id).status == "running"
    assert registry.get(record.id).ticks_done == 2
    assert recorder.counts()["agent_steps_done"] == 8


def test_progress_error_is_recorded(registry, spec) -> None:
    record = registry.create(spec)
    recorder = ProgressRecorder(registry, record.id)
    recorder(RunProgress("failed", ticks_done=1, ticks_total=2, agent_steps_done=4, agent_steps_total=8, error="boom"))
    assert registry.get(record.id).error == "boom"
    # A final status comes from the run's summary, not from a progress report.
    assert registry.get(record.id).status == "queued"


async def test_run_options_reach_every_run(registry, spec) -> None:
    seen: dict[str, Any] = {}

    async def run(spec: ExperimentSpec, run_dir: Path, client: Any, *, on_progress=None, **options: Any) -> Any:
        seen.update(options)
        return await fake_run()(spec, run_dir, client, on_progress=on_progress)

    submitter = Submitter(registry, client=object(), run=run, run_options={"llm_limits": "limits"})
    record = registry.create(spec)
    submitter.submit(record, spec)
    await _settle(submitter)
    assert registry.get(record.id).status == "completed"
    assert seen == {"llm_limits": "limits", "experiment_id": record.id}  # the id names its span and task keys


async def test_experiments_past_the_slots_wait_queued_and_start_as_slots_free(registry, spec) -> None:
    gate = asyncio.Event()
    submitter = Submitter(registry, client=object(), run=fake_run(block=gate), max_running=1)
    first, second = registry.create(spec), registry.create(spec)
    submitter.submit(first, spec)
    submitter.submit(second, spec)
    await _until(lambda: registry.get(first.id).status == "running")
    assert registry.get(second.id).status == "queued"
    assert submitter.active() == [first.id] and submitter.queued() == [second.id]
    gate.set()
    await _until(lambda: registry.get(second.id).status == "completed")
    assert registry.get(first.id).finished_at <= registry.get(second.id).started_at


async def test_cancel_of_a_queued_experiment_ends_it_cancelled_without_running_it(registry, spec) -> None:
    gate = asyncio.Event()
    submitter = Submitter(registry, client=object(), run=fake_run(block=gate), max_running=1)
    first, second = registry.create(spec), registry.create(spec)
    submitter.submit(first, spec)
    submitter.submit(second, spec)
    submitter.cancel(second.id)
    cancelled = registry.get(second.id)
    assert cancelled.status == "cancelled" and cancelled.started_at is None and cancelled.finished_at is not None
    assert submitter.queued() == []
    gate.set()
    await _settle(submitter)
    assert registry.get(second.id).status == "cancelled"


async def test_events_carry_status_changes_one_tick_per_tick_and_a_final(registry, spec) -> None:
    submitter = Submitter(registry, client=object(), run=fake_run())
    record = registry.create(spec)
    submitter.submit(record, spec)
    await _settle(submitter)
    events = submitter.events.open(registry.get(record.id)).since(0)
    assert [e.name for e in events] == ["status", "status", "tick", "tick", "status", "final"]
    assert [e.data["status"] for e in events if e.name == "status"] == ["queued", "running", "completed"]
    assert [e.data["ticks_done"] for e in events if e.name == "tick"] == [1, 2]
    assert events[-1].data["status"] == "completed" and events[-1].data["llm_calls"] == 8
    assert [e.seq for e in events] == list(range(1, 7))


async def test_resume_requeues_a_finished_experiment_with_a_new_budget_a_new_batch_size_and_resume_on(registry, spec, tmp_path) -> None:
    seen: list[dict[str, Any]] = []

    async def run(spec: ExperimentSpec, run_dir: Path, client: Any, *, on_progress=None, **options: Any) -> Any:
        seen.append({"budget": spec.budget, "batch_size": spec.batch_size, **options})
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "SOCIETY_STEP.json").write_text("{}")  # what a started run leaves
        return await fake_run()(spec, run_dir, client, on_progress=on_progress)

    submitter = Submitter(registry, client=object(), run=run)
    record = registry.create(spec)
    submitter.submit(record, spec)
    await _settle(submitter)
    resumed = submitter.resume(record.id, budget=BudgetSpec(max_calls=99), run_options={"batch_size": 7})
    stored = registry.spec(record.id)
    assert resumed.status == "queued" and stored["budget"]["max_calls"] == 99 and stored["batch_size"] == 7
    await _settle(submitter)
    assert registry.get(record.id).status == "completed"
    assert seen[0] == {"budget": None, "batch_size": spec.batch_size, "experiment_id": record.id}  # a new run: no resume
    assert seen[1]["resume"] is True and seen[1]["force"] is False and seen[1]["budget"].max_calls == 99
    assert seen[1]["batch_size"] == 7


async def test_resume_of_a_live_experiment_is_refused(registry, spec) -> None:
    submitter = Submitter(registry, client=object(), run=fake_run(block=asyncio.Event()))
    record = registry.create(spec)
    submitter.submit(record, spec)
    with pytest.raises(ExperimentBusyError, match="resume"):
        submitter.resume(record.id)
    await submitter.shutdown()


async def test_shutdown_flags_running_experiments_to_resume_and_adopt_queues_them_again(registry, spec) -> None:
    submitter = Submitter(registry, client=object(), run=fake_run(block=asyncio.Event()), max_running=1, progress_interval=0)
    running, waiting = registry.create(spec), registry.create(spec)
    submitter.submit(running, spec)
    submitter.submit(waiting, spec)
    await _until(lambda: registry.get(running.id).ticks_done == 1)
    await submitter.shutdown()
    assert registry.get(running.id).resume_on_start is True
    assert registry.get(waiting.id).status == "queued"  # never started: still queued on disk

    restarted = ExperimentRegistry(registry._records_dir.parent)
    assert restarted.get(running.id).status == "queued" and restarted.get(running.id).resumed_after_restart == 1
    again = Submitter(restarted, client=object(), run=fake_run(), max_running=1)
    assert again.adopt() == [running.id, waiting.id]  # oldest first
    await _settle(again)
    assert {restarted.get(i).status for i in (running.id, waiting.id)} == {"completed"}


def test_the_recorder_writes_a_new_phase_at_once_and_announces_each_phase_once(tmp_path: Path, spec) -> None:
    registry = CountingRegistry(tmp_path)
    record = registry.create(spec)
    now, announced = [0.0], []
    recorder = ProgressRecorder(registry, record.id, interval=60, clock=lambda: now[0], on_phase=announced.append)
    running = _progress("running", 0, 0)
    for t, phase, done in [(0.0, "creating workspaces", 1), (0.1, "creating workspaces", 2), (0.2, "tick", None),
                           (0.3, "committing", None), (0.4, "committing", None)]:
        now[0] = t
        recorder(dataclasses.replace(running, phase=phase, phase_done=done))
    assert [p.phase for p in announced] == ["creating workspaces", "tick", "committing"]
    assert [u.get("phase") for u in registry.updates] == ["creating workspaces", "tick", "committing"]  # counts wait
    assert registry.get(record.id).phase == "committing"


def calling_run(budgets: list[int | None], calls_per_tick: int = 10, ticks: int = 50):
    """A run function that makes ``calls_per_tick`` calls a tick, as its progress reports them, and ends
    ``budget_exhausted`` when its budget's calls are spent (as the engine's budget gate ends a run)."""

    async def run(spec: ExperimentSpec, run_dir: Path, client: Any, *, on_progress=None, experiment_id=None) -> Any:
        budget = spec.budget.max_calls if spec.budget is not None else None
        budgets.append(budget)
        calls = 0
        for tick in range(1, ticks + 1):
            if budget is not None and calls + calls_per_tick > budget:
                break
            await asyncio.sleep(0.001)
            calls += calls_per_tick
            on_progress(dataclasses.replace(_progress("running", tick, tick), llm_calls=calls))
        status = "completed" if tick == ticks else "budget_exhausted"
        return RunSummary(status=status, run_dir=run_dir, ticks_done=tick, agent_steps=tick, llm_calls=calls,
                          input_tokens=0, output_tokens=0, duration_s=0.1, error=None)

    return run


async def test_an_experiment_starts_with_a_budget_of_the_calls_its_owner_has_left_today(registry, spec) -> None:
    budgets: list[int | None] = []
    submitter = Submitter(registry, client=object(), run=calling_run(budgets), daily_calls=lambda owner: 100)
    submitter.llm_calls.add(spec_owner := registry.create(spec).owner, 60)
    record = registry.create(spec)
    submitter.submit(record, spec)
    await _settle(submitter)
    assert budgets == [40] and registry.get(record.id).status == "budget_exhausted"
    assert submitter.llm_calls.today(spec_owner) == 100
    late = registry.create(spec)  # queued or resubmitted once nothing is left: ended before it runs
    submitter.submit(late, spec)
    await _settle(submitter)
    assert budgets == [40] and registry.get(late.id).status == "budget_exhausted"
    assert "no LLM calls left today" in (registry.get(late.id).error or "")


async def test_running_experiments_of_one_owner_stop_together_when_their_calls_reach_the_daily_quota(registry, spec) -> None:
    budgets: list[int | None] = []
    submitter = Submitter(registry, client=object(), run=calling_run(budgets), max_running=5, daily_calls=lambda owner: 100)
    records = [registry.create(spec) for _ in range(5)]
    for record in records:
        submitter.submit(record, spec)
    await _settle(submitter)
    assert budgets == [100] * 5  # each started with the whole allowance; together they are stopped at it
    ended = [registry.get(record.id) for record in records]
    assert {record.status for record in ended} == {"budget_exhausted"}
    total = submitter.llm_calls.today(records[0].owner)
    assert 100 <= total <= 100 + 5 * 10  # at most one progress report's calls past it per experiment (945 before)
