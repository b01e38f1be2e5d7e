"""Agent state on disk: packed workspaces against one folder per agent, counted in files and bytes.

In one process, on the simulated LLM (no Dask, no env actor: the agent runtime and its state only):
1. creates N PersonAgents and packs them in batches of --batch (one pack per batch): agents/s,
   files and bytes per agent;
2. steps --step-agents of them for --ticks ticks, side by side:
   packed: load from the last pack, step, write one pack per batch per tick;
   dir:    step on a folder per agent (``DirWorkspace``, as the ``dir`` layout keeps them; no journal);
   and prints the warm seconds per tick, files and bytes per agent-tick of each, and their ratio.

Usage: python benchmarks/workspace_packs.py [--agents 100000] [--step-agents 1000] [--ticks 3] [--batch 256] [--dir PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # rundirs, when run as a script

from rundirs import disk_usage  # noqa: E402

from engine.agent.packed import PackedWorkspaces
from engine.agent.person import PersonAgent
from engine.agent.service_proxy import ServiceProxy
from engine.agent.workspace import AgentWorkspace, DirWorkspace, workspace_name
from engine.agent.workspace_in_memory import MemoryWorkspace
from engine.env.actor import EnvRouterConfig, build_router
from engine.llm.client import LLMClient
from engine.storage.packs import PackWriter
from engine.storage.store import LocalStore

T0 = datetime(2024, 1, 1, 8)
CONFIG = {"max_react_turns": 1, "tools": ["finish"]}


def profile(i: int) -> dict[str, object]:
    return {"name": f"person {i}", "age": 20 + i % 60, "occupation": ("teacher", "nurse", "driver", "farmer")[i % 4]}


def create_packed(store: LocalStore, n: int, batch: int) -> dict[int, str]:
    where: dict[int, str] = {}
    for first in range(0, n, batch):
        name = f"packs/000000-{first // batch:05d}.pack"
        writer = PackWriter(name, 0)
        packed = PackedWorkspaces(store)
        for agent_id in range(first, min(n, first + batch)):
            ws = MemoryWorkspace(workspace_name(agent_id))
            PersonAgent.create(ws, agent_id=agent_id, profile=profile(agent_id), config=CONFIG)
            packed.pack(writer, agent_id, ws)
            where[agent_id] = name
        writer.write(store)
    return where


async def step_all(workspaces: list[AgentWorkspace], proxy: ServiceProxy, t: datetime) -> None:
    async def one(ws: AgentWorkspace) -> None:
        agent = await PersonAgent.from_workspace(ws, proxy)
        await agent.step(60, t)
        await agent.to_workspace()

    await asyncio.gather(*(one(ws) for ws in workspaces))


async def main(args: argparse.Namespace) -> None:
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="polis-packs-"))
    router = build_router(EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react"))
    proxy = ServiceProxy(env=router, llm={"default": LLMClient(model="sim/default:bench")})

    store = LocalStore(base / "created")
    started = time.perf_counter()
    create_packed(store, args.agents, args.batch)
    seconds = time.perf_counter() - started
    files, size = disk_usage(base / "created")
    print(f"create {args.agents} agents, packed: {args.agents / seconds:,.0f} agents/s; "
          f"{files} files ({files / args.agents:.4f} per agent), {size / args.agents:,.0f} bytes per agent")

    n = args.step_agents
    packed_store = LocalStore(base / "packed")
    where = create_packed(packed_store, n, args.batch)
    dir_root = base / "dir"
    for agent_id in range(n):
        PersonAgent.create(DirWorkspace(dir_root / workspace_name(agent_id)), agent_id=agent_id, profile=profile(agent_id), config=CONFIG)
    before = {"packed": disk_usage(base / "packed"), "dir": disk_usage(dir_root)}
    ticks: dict[str, list[float]] = {"packed": [], "dir": []}
    for tick in range(1, args.ticks + 1):
        t = T0 + timedelta(minutes=tick)
        for kind in ("packed", "dir") if tick % 2 else ("dir", "packed"):  # alternate who goes first
            started = time.perf_counter()
            for first in range(0, n, args.batch):
                ids = range(first, min(n, first + args.batch))
                if kind == "dir":
                    await step_all([DirWorkspace(dir_root / workspace_name(a)) for a in ids], proxy, t)
                    continue
                packed = PackedWorkspaces(packed_store)
                workspaces = [packed.load(a, where[a]) for a in ids]
                await step_all(list(workspaces), proxy, t)
                name = f"packs/{tick:06d}-{first // args.batch:05d}.pack"
                writer = PackWriter(name, tick)
                for agent_id, ws in zip(ids, workspaces, strict=True):
                    packed.pack(writer, agent_id, ws)
                    where[agent_id] = name
                writer.write(packed_store)
            ticks[kind].append(time.perf_counter() - started)
    agent_ticks = n * args.ticks
    for kind, root in (("packed", base / "packed"), ("dir", dir_root)):
        files, size = disk_usage(root)
        warm = min(ticks[kind][1:] or ticks[kind])
        print(f"{kind:>6}: {n} agents x {args.ticks} ticks, warm tick {warm:.2f} s ({n / warm:,.0f} agent-steps/s); "
              f"files per agent-tick {(files - before[kind][0]) / agent_ticks:.4f}, "
              f"bytes per agent-tick {(size - before[kind][1]) / agent_ticks:,.0f}")
    print(f"warm tick ratio packed/dir: {min(ticks['packed'][1:] or ticks['packed']) / min(ticks['dir'][1:] or ticks['dir']):.2f}")
    print(f"peak RSS of this process: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:,.0f} MB")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=100_000)
    parser.add_argument("--step-agents", type=int, default=1000)
    parser.add_argument("--ticks", type=int, default=3)
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--dir", help="where the stores go (default: a new temp folder, which is kept for inspection)")
    asyncio.run(main(parser.parse_args()))
