"""Work a run hands off (``Shell.offload``): it runs on a worker (Dask) or a thread of its own (in-process), and a
cancelled caller stops it at its next checkpoint, where before a run's network went on in a thread of the service.

The work below would go on for ten minutes; each test cancels it once it is under way and waits (with a bound that
only catches a hang) for it to say where it stopped. Nothing here asks how fast anything is.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine.errors import WorkCancelledError
from engine.society.run.dashboard import NETWORK, key_kind
from engine.society.run.runner import run_experiment
from engine.society.shells import DaskShell, InProcessShell
from engine.spec import parse_spec
from tests.engine.society.span_ledger import install_ledger, task_spans

#: How long the work below would go on if nothing stopped it.
FOREVER_S = 600.0
#: Bounds a hang only.
PATIENCE_S = 120.0


def _work(marker: str, checkpoint: Callable[[], None]) -> str:
    """Call the checkpoint every 20 ms for :data:`FOREVER_S`; write to ``marker`` whether it stopped the work."""
    path = Path(marker)
    path.with_suffix(".started").write_text("started")
    deadline = time.monotonic() + FOREVER_S
    try:
        while time.monotonic() < deadline:
            checkpoint()
            time.sleep(0.02)
    except WorkCancelledError:
        path.write_text("stopped at a checkpoint")
        raise
    path.write_text("ran to the end")
    return "done"


def _answer(checkpoint: Callable[[], None]) -> int:
    checkpoint()
    return 42


async def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + PATIENCE_S
    while not condition():
        assert time.monotonic() < deadline, "timed out waiting"
        await asyncio.sleep(0.05)


async def _cancel_while_working(shell: object, marker: Path) -> None:
    caller = asyncio.ensure_future(shell.offload(partial(_work, str(marker)), key="polis_test_network-000000-offload"))  # type: ignore[attr-defined]
    await _until(lambda: marker.with_suffix(".started").exists())
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    await _until(marker.exists)
    assert marker.read_text() == "stopped at a checkpoint"


async def test_in_process_offloaded_work_returns_its_result_and_a_cancel_stops_it_before_the_caller_unwinds(tmp_path: Path):
    shell = InProcessShell()
    assert await shell.offload(_answer, key="k") == 42
    marker = tmp_path / "work.txt"
    caller = asyncio.ensure_future(shell.offload(partial(_work, str(marker)), key="k"))
    await _until(lambda: marker.with_suffix(".started").exists())
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    # The caller unwound only once the thread had stopped: nothing works on for a cancelled run.
    assert marker.read_text() == "stopped at a checkpoint"


async def test_on_dask_offloaded_work_is_a_worker_task_and_a_cancel_stops_it_at_its_next_checkpoint(dask_client, tmp_path: Path):
    shell = DaskShell(dask_client)
    assert await shell.offload(_answer, key="polis_test_network-000000-answer") == 42
    await _cancel_while_working(shell, tmp_path / "work.txt")


SPEC = {
    "name": "net", "seed": 5, "population": [{"count": 300}], "steps": [{"type": "run", "num_steps": 1, "tick": 600}],
    "network": {"layers": {"follow": {"generate": {"model": "erdos_renyi", "p": 1.0}, "directed": True},
                           "kin": {"generate": {"model": "watts_strogatz", "k": 4, "p": 0.2}}}},
    "environment": {"modules": [{"type": "SocialMediaSpace", "network": {"follows": "follow"}}]},
}


def _edges(run: Path) -> list[tuple]:
    table = pq.read_table(run / "replay" / "network_edges").select(["layer", "source", "target"])
    return sorted(zip(*(table.column(c).to_pylist() for c in table.column_names), strict=True))


async def test_a_run_on_dask_makes_its_network_in_a_worker_task_with_the_edges_an_in_process_run_makes(dask_client, tmp_path: Path):
    await install_ledger(dask_client)
    phases: list[str | None] = []
    on_dask = await run_experiment(parse_spec(SPEC), tmp_path / "dask", dask_client, experiment_id="net0dask",
                                   on_progress=lambda progress: phases.append(progress.phase))
    here = await run_experiment(parse_spec(SPEC), tmp_path / "here", InProcessShell())
    assert (on_dask.status, here.status) == ("completed", "completed"), (on_dask.error, here.error)
    assert "building network" in phases
    edges = _edges(tmp_path / "dask")
    assert edges == _edges(tmp_path / "here")
    assert sum(layer == "follow" for layer, _, _ in edges) == 300 * 299  # p = 1: every pair, both ways
    spans = await task_spans(dask_client)
    assert [name for key, name in spans.items() if key.startswith("polis_net0dask_") and key_kind(key) == NETWORK] == [("net0dask",)]
