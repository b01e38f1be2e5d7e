"""A plugin module that only queues its updates is exactly-once when agent-steps are re-run: through
the actor proxy, and in a run whose batch worker is SIGKILLed mid-tick."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import datetime, timedelta

import pytest

from engine.env.actor import EnvRouterActor, EnvRouterConfig
from engine.env.control import EndTick
from engine.env.proxy import EnvRouterProxy
from engine.failpoints import arm
from engine.society.run.dashboard import ENV_ROUTER, key_kind
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import RunLayout
from tests.engine.env.plugin_modules import PluginModulesOnWorkers, register_plugin_modules, unregister_plugin_modules

START = datetime(2026, 1, 1, 8)
AGENTS = 6
TICKS = 3


@pytest.fixture
async def plugin_workers(dask_client):
    register_plugin_modules()  # this process validates the spec
    await dask_client.register_plugin(PluginModulesOnWorkers())
    try:
        yield dask_client
    finally:
        await dask_client.unregister_worker_plugin(PluginModulesOnWorkers.name)
        unregister_plugin_modules()


async def _failed_then_retried(proxy: EnvRouterProxy, agent_id: int) -> int:
    """In a batch task: an agent-step adds points, fails, is undone (discard) and re-run."""
    await proxy.call_tool("add", {"agent_id": agent_id, "points": 5})
    dropped = await proxy.discard_pending(agent_id)
    await proxy.call_tool("add", {"agent_id": agent_id, "points": 5})
    return dropped


async def _once(proxy: EnvRouterProxy, agent_id: int) -> None:
    await proxy.call_tool("add", {"agent_id": agent_id, "points": 7})


async def _tally(proxy: EnvRouterProxy, agent_id: int) -> str:
    return await proxy.observe(agent_id)


async def test_discard_through_the_proxy_drops_a_failed_steps_updates_of_a_plugin_that_overrides_nothing(plugin_workers, tmp_path):
    client = plugin_workers
    handle = await client.submit(EnvRouterActor, EnvRouterConfig(modules=(("TallySpace", {}),), run_dir=tmp_path), actor=True)
    await handle.init(START, [1, 2])
    proxy = EnvRouterProxy(address=handle._address, key=handle.key)

    dropped, _ = await client.gather([client.submit(_failed_then_retried, proxy, 1, pure=False),
                                      client.submit(_once, proxy, 2, pure=False)])
    await handle.end_tick(EndTick(1, 3600, START + timedelta(hours=1), 1, "run-1"))

    assert dropped == 1
    assert await client.submit(_tally, proxy, 1, pure=False) == "tally 5"
    assert await client.submit(_tally, proxy, 2, pure=False) == "tally 7"
    await handle.close()


def _tally_spec(storage: str) -> dict:
    rule = {"rule": {"rule": "always_cooperate", "tool": "add", "arguments": {"points": 1}}}
    return {
        "name": "tally",
        "seed": 3,
        "agents": [{"id": i, "type": "RuleBasedAgent", "profile": {"name": f"R{i}"}, "config": rule} for i in range(AGENTS)],
        "environment": {"modules": [{"type": "TallySpace"}], "router": "react", "max_router_steps": 1},
        "steps": [{"type": "run", "num_steps": TICKS, "tick": 3600}],
        "batch_size": 3,
        "max_workers": 2,
        "storage": {"workspaces": storage},
    }


async def _actor_worker(client) -> str:  # noqa: ANN001
    who = await client.who_has()
    holders = [addrs for key, addrs in who.items() if key_kind(key) == ENV_ROUTER and addrs]
    assert len(holders) == 1, who
    return holders[0][0]


async def _wait_for_workers(client, n: int = 2) -> None:  # noqa: ANN001
    """Until the session cluster has ``n`` workers again (its nanny restarts a killed one: slowly, on a busy machine)."""
    async with asyncio.timeout(120):  # only bounds a hang
        while len(await client.run(os.getpid)) < n:
            await asyncio.sleep(0.2)


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
    assert _final_totals(run) == {str(i): TICKS for i in range(AGENTS)}
    with ReplayReader(run) as reader:
        rows = reader.query("SELECT agent_id, step, count(*) AS n FROM actions GROUP BY ALL").to_pylist()
    assert len(rows) == AGENTS * TICKS and {r["n"] for r in rows} == {1}
    await _wait_for_workers(client)
