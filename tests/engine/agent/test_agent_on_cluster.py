"""Agents as stateless records on a real LocalCluster: state crosses workers only through the workspace."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from datetime import datetime
from pathlib import Path

import pytest
from distributed import Client, LocalCluster

from engine.agent.person import PersonAgent
from engine.agent.service_proxy import ServiceProxy
from engine.env.actor import EnvRouterConfig, build_router
from engine.llm.client import LLMClient
from engine.society.run.dashboard import ENV_ROUTER, key_kind
from engine.society.run.runner import run_experiment
from engine.society.workspaces.manifest import agent_workspace
from engine.spec import parse_spec

T1 = datetime(2026, 1, 1, 9)


async def _activate(ws: str) -> tuple[int, tuple[str, ...]]:
    """Tick 1 on one worker: the agent activates a skill and writes its workspace back."""
    proxy = ServiceProxy(env=build_router(EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react")), llm={"default": LLMClient()})
    agent = await PersonAgent.from_workspace(Path(ws), proxy)
    reply = await agent.dispatch_react_tool("activate_skill", {"name": "daily-planning"})
    assert not reply.startswith("error"), reply
    await agent.to_workspace()
    return os.getpid(), agent.skills.active


async def _active(ws: str) -> tuple[int, tuple[str, ...]]:
    """Tick 2 on another worker: a fresh agent object rebuilt from the workspace."""
    proxy = ServiceProxy(env=build_router(EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react")), llm={"default": LLMClient()})
    agent = await PersonAgent.from_workspace(Path(ws), proxy)
    return os.getpid(), agent.skills.active


async def test_a_skill_activated_in_tick_1_is_active_in_tick_2_on_another_worker(dask_client, tmp_path):
    ws = tmp_path / "agents" / "agent_0001"
    PersonAgent.create(ws, agent_id=1, profile={"name": "Ada", "occupation": "teacher"}, config={})
    workers = list(await dask_client.run(os.getpid))
    pid1, active1 = await dask_client.submit(_activate, str(ws), workers=[workers[0]], pure=False)
    pid2, active2 = await dask_client.submit(_active, str(ws), workers=[workers[1]], pure=False)

    assert pid1 != pid2
    assert active1 == active2 == ("daily-planning",)


@pytest.mark.parametrize("storage", ["packed", "dir"])
async def test_killing_a_worker_mid_step_leaves_every_workspace_readable(storage, tmp_path):
    spec = parse_spec({
        "name": "kill",
        "population": [{"count": 60, "profile_template": {"name": "P{i}"}, "config": {"max_react_turns": 3}}],
        "steps": [{"type": "run", "num_steps": 10, "tick": 600}],
        "batch_size": 10,
        "storage": {"workspaces": storage},
    })
    cluster = await LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                 dashboard_address="127.0.0.1:0", asynchronous=True)
    client = await Client(cluster, asynchronous=True)
    try:
        run = asyncio.ensure_future(run_experiment(spec, tmp_path / "run", client))
        async with asyncio.timeout(120):  # wait until agents have stepped at least once (only bounds a hang)
            while not (tmp_path / "run" / "replay" / "actions").exists():
                assert not run.done(), run
                await asyncio.sleep(0.05)
        pids = await client.run(os.getpid)
        # Kill the worker that does not host the env actor (losing the actor is issue 6's recovery).
        holders = {addr for key, addrs in (await client.who_has()).items() if key_kind(key) == ENV_ROUTER for addr in addrs}
        victim = next(addr for addr in pids if addr not in holders)
        os.kill(pids[victim], signal.SIGKILL)  # mid-tick, no warning
        summary = await asyncio.wait_for(run, 120)
    finally:
        await client.close()
        await cluster.close()

    # Whatever the run's fate (Dask retries the lost batches elsewhere), no workspace is torn.
    assert summary.status in ("completed", "failed")
    for agent_id in range(60):
        ws = agent_workspace(tmp_path / "run", agent_id)  # the committed state, packed or a folder
        assert ws is not None, agent_id
        assert ws.read_json("config.json")["id"] == ws.read_json("AGENT.json")["id"] == agent_id
        for log in (p for p in ws.files(".runtime/logs") if p.endswith(".jsonl")):
            lines = ws.read_text(log).splitlines()
            for line in lines[:-1] if storage == "dir" else lines:  # only a folder's last line may be torn by a crash
                json.loads(line)
