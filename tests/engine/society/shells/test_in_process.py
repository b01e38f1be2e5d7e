"""The in-process shell (:mod:`engine.society.shells.in_process`): a run's env router lost mid-tick is restarted from
the last committed snapshot, and the run ends exactly as one that never lost it (as on Dask when the actor's worker
dies: ``tests/engine/society/test_worker_death.py``)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from engine.env.actor import EnvRouterConfig
from engine.run_progress import RunProgress
from engine.society.run.runner import run_experiment
from engine.society.shells import InProcessEnvHost, InProcessShell
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader
from tests.engine.society.crash_support import AGENTS, crash_spec, final_state


class RecordingShell(InProcessShell):
    """An in-process shell that keeps every env host it makes, so a test can lose one."""

    def __init__(self) -> None:
        super().__init__()
        self.hosts: list[InProcessEnvHost] = []

    def env_host(self, config: EnvRouterConfig, *, start_t: datetime, agent_ids: list[int], run_id: str) -> InProcessEnvHost:
        host = super().env_host(config, start_t=start_t, agent_ids=agent_ids, run_id=run_id)
        self.hosts.append(host)
        return host


def spec() -> dict[str, Any]:
    data = crash_spec()
    data["steps"] = [{"type": "run", "num_steps": 3, "tick": 3600}]
    data["batch_size"] = 2  # three batches a tick, in flight together on the shell's slots
    return data


async def test_an_env_router_lost_mid_tick_restarts_from_the_snapshot_and_steps_each_agent_once(tmp_path) -> None:
    reference = await run_experiment(parse_spec(spec()), tmp_path / "reference", InProcessShell())
    assert reference.status == "completed", reference.error
    assert reference.env_recoveries == 0

    shell = RecordingShell()
    lost: list[int] = []

    def on_progress(progress: RunProgress) -> None:
        # tick 2 has begun and one of its batches is done while the others are still running
        if not lost and progress.ticks_done == 1 and progress.agent_steps_done >= AGENTS + 2:
            (host,) = shell.hosts
            lost.append(host.generation)
            host.lose("the test says so")

    summary = await run_experiment(parse_spec(spec()), tmp_path / "run", shell, on_progress=on_progress)

    assert lost, "the router was never lost"
    assert summary.status == "completed", summary.error
    assert summary.env_recoveries == 1
    (host,) = shell.hosts
    assert host.generation == lost[0] + 1  # restarted once, from the last committed snapshot
    with ReplayReader(tmp_path / "run") as reader:
        rows = reader.query("SELECT agent_id, step, count(*) AS n FROM actions GROUP BY ALL").to_pylist()
    assert len(rows) == AGENTS * 3 and {r["n"] for r in rows} == {1}
    state, expected = final_state(tmp_path / "run"), final_state(tmp_path / "reference")
    for key in ("actions", "messaging", "env", "workspaces"):
        assert state[key] == expected[key], key
