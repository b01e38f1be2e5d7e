"""Processes die under a live run: a batch worker (also under a plugin module that only queues its updates), the env
actor's worker, or the driver gets SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from pathlib import Path

import pytest

from engine.failpoints import arm
from engine.society.lease import effective_status
from engine.society.run.dashboard import AGENTS as AGENT_BATCHES
from engine.society.run.dashboard import ENV_ROUTER, key_kind
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import RunLayout
from tests.engine.env.plugin_modules import PluginModulesOnWorkers, register_plugin_modules, unregister_plugin_modules
from tests.engine.society.crash_support import (
    AGENTS,
    crash_spec,
    final_state,
    group_is_gone,
    kill_group,
    start_driver,
    write_spec,
)
from tests.engine.society.span_ledger import install_ledger, task_spans


def _long_spec(ticks: int) -> dict:
    spec = crash_spec()
    spec["steps"] = [{"type": "run", "num_steps": ticks, "tick": 3600}]
    return spec


async def _actor_worker(client) -> str:
    who = await client.who_has()
    holders = [addrs for key, addrs in who.items() if key_kind(key) == ENV_ROUTER and addrs]
    assert len(holders) == 1, who
    return holders[0][0]


async def _kill_worker(client, address: str) -> None:
    pids = await client.run(os.getpid)
    os.kill(pids[address], signal.SIGKILL)


async def _run_and_kill(client, run: Path, spec: dict, choose, experiment_id: str | None = None) -> object:  # noqa: ANN001
    """Run ``spec``; once tick 2's first batch is done, SIGKILL the worker ``choose`` picks."""
    killed: list[str] = []

    def on_progress(progress) -> None:  # noqa: ANN001
        if not killed and progress.ticks_done == 1 and progress.agent_steps_done >= AGENTS + 2:
            killed.append("pending")
            asyncio.get_running_loop().create_task(kill())

    async def kill() -> None:
        address = await choose(client)
        killed[0] = address
        await _kill_worker(client, address)

    summary = await run_experiment(parse_spec(spec), run, client, on_progress=on_progress, experiment_id=experiment_id)
    assert killed and killed[0] != "pending", "the kill never happened"
    return summary


async def _wait_for_workers(client, n: int = 2) -> None:
    """Until the session cluster has ``n`` workers again (its nanny restarts a killed one: slowly, on a busy machine)."""
    async with asyncio.timeout(120):  # only bounds a hang
        while len(await client.run(os.getpid)) < n:
            await asyncio.sleep(0.2)


async def test_killing_a_batch_worker_mid_tick_still_steps_every_agent_exactly_once(dask_client, tmp_path):
    spec = _long_spec(3)
    spec.update(batch_size=2, max_workers=2)
    reference = await run_experiment(parse_spec(spec), tmp_path / "reference", dask_client)
    assert reference.status == "completed"
    # The worker without the env actor dies right after the first agent of its first tick-2 batch
    # committed: Dask retries that batch elsewhere, where the committed agent must be re-emitted,
    # not stepped again, and its batch-mate rolled back and stepped.
    await install_ledger(dask_client)
    task = asyncio.get_running_loop().create_task(
        run_experiment(parse_spec(spec), tmp_path / "run", dask_client, experiment_id="b4tch0w0rker"))
    while not list((tmp_path / "run").glob("SOCIETY_STEP.json")):
        await asyncio.sleep(0.01)
    actor = await _actor_worker(dask_client)
    victim = next(a for a in await dask_client.run(os.getpid) if a != actor)
    await dask_client.run(arm, "mid_batch:step=2:kill=self", workers=[victim])
    summary = await task

    assert summary.status == "completed", summary.error
    assert summary.env_recoveries == 0
    assert summary.replayed >= 1 and summary.rolled_back >= 1, summary
    with ReplayReader(tmp_path / "run") as reader:
        rows = reader.query("SELECT agent_id, step, count(*) AS n FROM actions GROUP BY ALL").to_pylist()
        assert len(rows) == AGENTS * 3 and {r["n"] for r in rows} == {1}
        assert reader.query("SELECT count(*) AS n FROM actions WHERE status = 'error'").column("n")[0].as_py() == 0
    # The batch Dask retried on the other worker stayed in the run's span, as did every other task.
    mine = {key: name for key, name in (await task_spans(dask_client)).items() if key.startswith("polis_b4tch0w0rker_")}
    assert {key_kind(key) for key in mine} == {AGENT_BATCHES, ENV_ROUTER} and set(mine.values()) == {("b4tch0w0rker",)}
    await _wait_for_workers(dask_client)


async def test_killing_the_env_actors_worker_recovers_the_actor_and_reruns_the_tick(dask_client, tmp_path):
    spec = _long_spec(3)
    reference = await run_experiment(parse_spec(spec), tmp_path / "reference", dask_client)
    assert reference.status == "completed"
    await _wait_for_workers(dask_client)

    await install_ledger(dask_client)
    summary = await _run_and_kill(dask_client, tmp_path / "run", spec, _actor_worker, experiment_id="act0r1ost")
    assert summary.status == "completed", summary.error
    assert summary.env_recoveries >= 1
    # The actor started again after its worker died joined the run's span, as did every batch.
    mine = {key: name for key, name in (await task_spans(dask_client)).items() if key.startswith("polis_act0r1ost_")}
    assert len({key for key in mine if key_kind(key) == ENV_ROUTER}) == 1 + summary.env_recoveries, mine
    assert set(mine.values()) == {("act0r1ost",)}
    # The tick that lost its actor was re-run from the last committed snapshot: the run ends exactly
    # as one that never lost it.
    state, expected = final_state(tmp_path / "run"), final_state(tmp_path / "reference")
    for key in ("actions", "messaging", "env", "workspaces"):
        assert state[key] == expected[key], key
    await _wait_for_workers(dask_client)


#: The cancelled run's ticks: enough that the signal lands long before its end.
TICKS = 16


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
async def test_a_signal_cancels_the_run_leaves_no_process_and_the_run_resumes(sig, shell, tmp_path):
    spec = _long_spec(TICKS)
    run = tmp_path / "run"
    driver = start_driver(["run", str(write_spec(tmp_path / "spec.yaml", spec)), "--run-dir", str(run)], cwd=Path.cwd())
    try:
        deadline = time.monotonic() + 120  # wait for the first committed tick (only bounds a hang)
        while True:
            status_file = run / "SOCIETY_STEP.json"
            if status_file.exists() and '"step_count": 1' in status_file.read_text():
                break
            assert driver.poll() is None, driver.communicate()[1][-3000:]
            if time.monotonic() > deadline:
                pytest.fail("the run never committed a tick")
            await asyncio.sleep(0.1)
        driver.send_signal(sig)
        # Cancelled, not run to its end: TICKS - 1 ticks are left. The timeout only bounds a hang; stopping within 10 s of
        # the signal is a speed goal, not behaviour (speed goals live in benchmarks/).
        out, err = await asyncio.to_thread(driver.communicate, timeout=120)
        assert driver.returncode == 130, err[-3000:]
        assert "status: cancelled" in out
        assert json.loads(status_file.read_text())["step_count"] < TICKS
        gone_by = time.monotonic() + 60  # the group's processes end once they see theirs did (only bounds a hang)
        while not group_is_gone(driver.pid) and time.monotonic() < gone_by:
            await asyncio.sleep(0.1)
        assert group_is_gone(driver.pid), "a process of the cancelled run is still alive"
    finally:
        kill_group(driver.pid)
    assert effective_status(run) == "cancelled"

    resumed = await run_experiment(parse_spec(spec), run, shell, resume=True)  # the run directory is all a resume reads
    assert resumed.status == "completed", resumed.error
    with ReplayReader(run) as reader:
        rows = reader.query("SELECT agent_id, step, count(*) AS n FROM actions GROUP BY ALL").to_pylist()
    assert len(rows) == AGENTS * TICKS and {r["n"] for r in rows} == {1}


# ---- a plugin module's queued updates when a batch worker dies ---------------------------------------------

TALLY_AGENTS = 6
TALLY_TICKS = 3


@pytest.fixture
async def plugin_workers(dask_client):
    register_plugin_modules()  # this process validates the spec
    await dask_client.register_plugin(PluginModulesOnWorkers())
    try:
        yield dask_client
    finally:
        await dask_client.unregister_worker_plugin(PluginModulesOnWorkers.name)
        unregister_plugin_modules()


def _tally_spec(storage: str) -> dict:
    rule = {"rule": {"rule": "always_cooperate", "tool": "add", "arguments": {"points": 1}}}
    return {
        "name": "tally",
        "seed": 3,
        "agents": [{"id": i, "type": "RuleBasedAgent", "profile": {"name": f"R{i}"}, "config": rule} for i in range(TALLY_AGENTS)],
        "environment": {"modules": [{"type": "TallySpace"}], "router": "react", "max_router_steps": 1},
        "steps": [{"type": "run", "num_steps": TALLY_TICKS, "tick": 3600}],
        "batch_size": 3,
        "max_workers": 2,
        "storage": {"workspaces": storage},
    }


def _final_totals(run) -> dict[str, int]:  # noqa: ANN001
    layout = RunLayout(run)
    status = json.loads(layout.society_step_file.read_text())
    saved = layout.env_snapshots / status["env_snapshot"] / "TallySpace" / "state" / "ENV_STATE.json"
    return json.loads(saved.read_text())["state"]["totals"]


@pytest.mark.parametrize("storage", ["packed", "dir"])
async def test_killing_a_batch_worker_mid_tick_applies_a_plugins_updates_exactly_once(storage, plugin_workers, tmp_path):
    client = plugin_workers
    await _wait_for_workers(client)
    run = tmp_path / "run"
    # The worker without the env actor dies right after the first agent of its first tick-2 batch
    # committed. dir: the retried batch re-emits that agent and rolls its batch-mates back; packed: it
    # steps them all again from the committed packs. Either way their queued additions must be dropped first.
    task = asyncio.get_running_loop().create_task(run_experiment(parse_spec(_tally_spec(storage)), run, client))
    while not RunLayout(run).society_step_file.exists():
        await asyncio.sleep(0.01)
    actor = await _actor_worker(client)
    victim = next(a for a in await client.run(os.getpid) if a != actor)
    await client.run(arm, "mid_batch:step=2:kill=self", workers=[victim])
    summary = await task

    assert summary.status == "completed", summary.error
    assert summary.rolled_back >= 1 and (summary.replayed >= 1 if storage == "dir" else summary.replayed == 0), summary
    assert _final_totals(run) == {str(i): TALLY_TICKS for i in range(TALLY_AGENTS)}
    with ReplayReader(run) as reader:
        rows = reader.query("SELECT agent_id, step, count(*) AS n FROM actions GROUP BY ALL").to_pylist()
    assert len(rows) == TALLY_AGENTS * TALLY_TICKS and {r["n"] for r in rows} == {1}
    await _wait_for_workers(client)
