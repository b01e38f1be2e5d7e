"""A million-node network: generating it in numpy, and writing it as a run's network_edges, with peak memory.

For each generator (Barabasi-Albert m=10, Erdos-Renyi with about 10 edges per node, Watts-Strogatz k=20,
so about 10,000,000 edges each) it prints
    <model>: <edges> edges in <seconds> s, peak RSS <MB> MB (this process, so far)
and, for the Barabasi-Albert graph, the network_edges and network_fit datasets a run writes for it:
    network_edges and network_fit: <files> files, <MB> MB, <seconds> s

2026-12-06, 2 cores, n = 1,000,000: Barabasi-Albert 9,998,718 edges in 2.8-5.0 s, Erdos-Renyi 9,998,097 in
1.4-2.2 s, Watts-Strogatz 9,999,991 in 0.5-0.9 s; peak RSS about 1 GB (the edge arrays and the sort of their keys).
network_edges and network_fit of the Barabasi-Albert graph: 10 files, 56 MB, 13.4 s, of which the fit 4.8 s
(parsing the 1,000,000-agent spec: 0.24 s), peak RSS 2.1 GB.

Then, for the Barabasi-Albert graph as a directed follow layer (each edge both ways):
    graph: CSR build <seconds> s, <MB> MB of arrays, peak RSS <MB> MB
    neighbour queries in process: <N>/s (successors and predecessors of a random agent)
    env actor: started with the graph in <s> s; first my_profile <s> s; my_profile from 2 batch tasks: <N> calls/s
(the actor is what a run starts: SocialMediaSpace with the layer as its follows, on a LocalCluster of 2
worker processes; my_profile reads the agent's followees and followers from the graph).

2026-12-06, n = 1,000,000 (19,997,436 follows): CSR build 5.2 s (13.6 s with lexsort, int64 ids), 175 MB of arrays
with the reverse rows (328 MB as int64); 126,778 successor+predecessor queries/s in process; the env actor up in
2.9 s (73.9 s while the agent ids went as a list of ints) and 957 my_profile calls/s from 2 batch tasks.

Usage: python benchmarks/network.py [--nodes 1000000] [--skip-write] [--skip-actor] [--queries 20000]
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np

from engine.env.actor import EnvRouterActor, EnvRouterConfig
from engine.env.proxy import EnvRouterProxy
from engine.llm.client import LLMClient
from engine.network.generators import barabasi_albert, erdos_renyi, watts_strogatz
from engine.network.graph import Graph
from engine.society.run.cluster import open_client


def peak_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def follow_graph(n: int, low: np.ndarray, high: np.ndarray) -> Graph:
    """The graph as a directed follow layer (both ways), built as a run builds it; in-process query rate."""
    started = time.perf_counter()
    graph = Graph(np.concatenate([low, high]), np.concatenate([high, low]), np.arange(n, dtype=np.int64), layer="follow")
    graph.predecessors(0)  # the reverse rows, built on first use
    arrays = graph.nbytes()
    print(f"graph: CSR build {time.perf_counter() - started:.1f} s, {arrays / 2**20:.0f} MB of arrays, peak RSS {peak_mb()} MB")
    nodes = np.random.default_rng(2).integers(0, n, 200_000).tolist()
    started = time.perf_counter()
    for node in nodes:
        graph.successors(node)
        graph.predecessors(node)
    print(f"neighbour queries in process: {len(nodes) / (time.perf_counter() - started):,.0f}/s")
    return graph


async def _profiles(proxy: EnvRouterProxy, nodes: list[int]) -> int:
    """A batch task: each node's my_profile, concurrently (coalesced into actor calls)."""
    await asyncio.gather(*(proxy.call_tool("my_profile", {"agent_id": node}, readonly=True) for node in nodes))
    return len(nodes)


async def actor_queries(graph: Graph, n: int, queries: int) -> None:
    """The env actor a run starts, holding the graph: its start-up, then my_profile calls from 2 batch tasks."""
    async with open_client(dashboard_address="127.0.0.1:0") as client:
        config = EnvRouterConfig(modules=(("SocialMediaSpace", {"follows": graph}),), router="react",
                                 coder=LLMClient(role="coder", model="sim/default:unused"))
        started = time.perf_counter()
        actor = await client.submit(EnvRouterActor, config, actor=True)
        await actor.init(datetime(2026, 1, 1, 8), np.arange(n))  # as the driver sends them: one int64 buffer
        print(f"env actor: started with the graph in {time.perf_counter() - started:.1f} s", end="; ")
        proxy = EnvRouterProxy(address=actor._address, key=actor.key)
        started = time.perf_counter()
        await proxy.call_tool("my_profile", {"agent_id": 0}, readonly=True)
        print(f"first my_profile (builds the followers' rows) {time.perf_counter() - started:.1f} s", end="; ")
        workers = list(await client.run(lambda: None))
        nodes = np.random.default_rng(3).integers(0, n, queries).tolist()
        started = time.perf_counter()
        futures = [client.submit(_profiles, proxy, nodes[i::2], pure=False, workers=[workers[i % len(workers)]]) for i in range(2)]
        done = sum(await client.gather(futures))
        print(f"my_profile from 2 batch tasks: {done / (time.perf_counter() - started):,.0f} calls/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--skip-write", action="store_true")
    parser.add_argument("--skip-actor", action="store_true")
    parser.add_argument("--queries", type=int, default=20_000)
    args = parser.parse_args()
    n = args.nodes
    models = {"barabasi_albert": lambda rng: barabasi_albert(n, 10, rng),
              "erdos_renyi": lambda rng: erdos_renyi(n, 20 / n, rng),
              "watts_strogatz": lambda rng: watts_strogatz(n, 20, 0.1, rng)}
    graphs = {}
    for name, make in models.items():
        started = time.perf_counter()
        graphs[name] = make(np.random.default_rng(1))
        print(f"{name}: {len(graphs[name][0]):,} edges in {time.perf_counter() - started:.1f} s, peak RSS {peak_mb()} MB")
    low, high = graphs.pop("barabasi_albert")
    graphs.clear()
    graph = follow_graph(n, low, high)
    if not args.skip_actor:
        asyncio.run(actor_queries(graph, n, args.queries))
    del graph
    if args.skip_write:
        return
    from engine.society.run.network import SpecNetwork
    from engine.spec import parse_spec

    spec = parse_spec({"name": "net", "population": [{"count": n}], "steps": [{"type": "run", "num_steps": 1}],
                       "network": {"layers": {"follow": {"generate": {"model": "barabasi_albert", "m": 10}}}}})
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        network = SpecNetwork(spec)
        network.write(Path(tmp), "bench")
        files = [p for p in (Path(tmp) / "replay" / "network_edges").iterdir()]
        size = sum(p.stat().st_size for p in files)
        print(f"network_edges and network_fit: {len(files)} files, {size / 2**20:.0f} MB, {time.perf_counter() - started:.1f} s, "
              f"peak RSS {peak_mb()} MB")
        started = time.perf_counter()
        network.fit("follow")
        print(f"of which network_fit (degrees, sampled clustering, components): {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
