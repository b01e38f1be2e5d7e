"""A tick is a transaction: SIGKILL the whole run (driver and workers) anywhere, resume, and the run
ends exactly as an uninterrupted one — same rows, no duplicates, same workspaces, same env state.

The killed runs are ``polis run`` processes: a few on their LocalCluster (the group kill takes the driver
and its workers), the rest in-process (the whole run is one process, so every failpoint takes all of it).
Resumes and the reference runs are in-process: what a resume reads is the run directory alone."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path

import pytest

from engine.society.lease import effective_status
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader
from tests.engine.society.crash_support import AGENTS, QUESTIONS, crash_spec, final_state, group_is_gone, start_driver, write_spec

_reference: dict[str, object] = {}

#: (failpoint, ticks readers see after the kill, top-level steps completed when it fires)
POINTS = {
    "mid_batch": ("mid_batch:step=2", 1, 0),  # a worker dies after one of its batch's two agents committed tick 2
    "between_batches": ("between_batches:step=2", 1, 0),  # the driver dies after tick 2's first batch
    "env_step": ("env_step:step=2", 1, 0),  # the env actor dies after staging tick 2's rows, before its snapshot
    # The driver dies after committing tick 2 but before publishing its files: readers see tick 1
    # until the next driver rolls tick 2 forward (it does not run it again).
    "after_commit": ("after_commit:txn=2", 1, 0),
    "questionnaire": ("questionnaire:step_index=1", 2, 1),  # a worker dies after the questionnaire's first batch
    "between_steps": ("between_steps:index=1", 2, 2),  # the driver dies after the questionnaire, before the next run step
}


async def _reference_state(shell, root: Path, storage: str) -> dict[str, object]:
    """The uninterrupted run's end on ``storage`` (the two differ: a folder run's agents can list their step journals)."""
    if storage not in _reference:
        summary = await run_experiment(parse_spec(crash_spec(storage=storage)), root / "reference", shell)
        assert summary.status == "completed", summary.error
        _reference[storage] = final_state(root / "reference")
    return _reference[storage]  # type: ignore[return-value]


async def _wait_gone(pgid: int) -> bool:
    deadline = time.monotonic() + 60  # only bounds a hang: orphans see their driver gone late on a busy machine
    while time.monotonic() < deadline:
        if group_is_gone(pgid):
            return True
        await asyncio.sleep(0.1)
    return group_is_gone(pgid)


#: Every point on a folder per agent; on packs, the points of a tick (a worker or the driver lost mid-tick, after the commit).
CASES = [*((point, "dir") for point in POINTS), *((point, "packed") for point in ("mid_batch", "between_batches", "after_commit"))]
#: The cases whose killed run is on a LocalCluster: a worker's failpoint, the env actor's and the driver's.
ON_A_CLUSTER = {("mid_batch", "dir"), ("env_step", "dir"), ("between_batches", "packed")}


@pytest.mark.parametrize(("point", "storage"), CASES)
async def test_resume_after_sigkill_ends_like_an_uninterrupted_run(point, storage, shell, tmp_path, tmp_path_factory):
    failpoint, ticks_committed, steps_completed = POINTS[point]
    spec = crash_spec(storage=storage)
    run = tmp_path / "run"
    driver = start_driver(["run", str(write_spec(tmp_path / "spec.yaml", spec)), "--run-dir", str(run)],
                          failpoints=failpoint, cwd=Path.cwd(), in_process=(point, storage) not in ON_A_CLUSTER)
    _, err = await asyncio.to_thread(driver.communicate, timeout=150)
    assert driver.returncode == -signal.SIGKILL, err[-3000:]
    assert await _wait_gone(driver.pid), "processes of the killed run are still alive"

    # A killed driver is never reported as running, and readers see only committed transactions.
    assert effective_status(run) == "crashed"
    with ReplayReader(run) as reader:
        assert reader.count("actions") == AGENTS * ticks_committed
        answers = reader.count("questionnaire_answers") if "questionnaire_answers" in reader.datasets() else 0
        assert answers == (AGENTS * QUESTIONS if steps_completed >= 2 else 0)

    resumed = await run_experiment(parse_spec(spec), run, shell, resume=True)
    assert resumed.status == "completed", resumed.error
    assert not list(run.rglob("*.staged-*")), "a staged file survived the resumed run"

    state = final_state(run)
    reference = await _reference_state(shell, tmp_path_factory.mktemp("ref"), storage)
    per_agent_step = {(r["agent_id"], r["step"]) for r in state["actions"]}
    assert len(state["actions"]) == len(per_agent_step) == AGENTS * 3  # exactly once per agent per tick
    assert len(state["answers"]) == AGENTS * QUESTIONS
    for key in ("actions", "answers", "messaging", "env", "ticks", "completed_steps"):
        assert state[key] == reference[key], key
    assert state["workspaces"] == reference["workspaces"]


async def test_a_crashed_run_can_be_resumed_by_the_cli_and_reports_its_status(tmp_path):
    spec = crash_spec(ticks_after=1)
    run = tmp_path / "run"
    spec_path = write_spec(tmp_path / "spec.yaml", spec)
    crashed = start_driver(["run", str(spec_path), "--run-dir", str(run)], failpoints="between_batches:step=1", cwd=Path.cwd())
    await asyncio.to_thread(crashed.communicate, timeout=150)
    assert crashed.returncode == -signal.SIGKILL

    status = start_driver(["status", str(run)], cwd=Path.cwd())
    out, _ = await asyncio.to_thread(status.communicate, timeout=60)
    assert "status: crashed (last written: running)" in out

    resumed = start_driver(["run", "--resume", "--run-dir", str(run)], cwd=Path.cwd())
    out, err = await asyncio.to_thread(resumed.communicate, timeout=150)  # only bounds a hang
    assert resumed.returncode == 0, err[-3000:]
    assert "status: completed" in out
    with ReplayReader(run) as reader:
        rows = reader.query("SELECT agent_id, step, count(*) AS n FROM actions GROUP BY ALL").to_pylist()
    assert len(rows) == AGENTS * 3 and {r["n"] for r in rows} == {1}
