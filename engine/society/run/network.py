"""A run's network: the ``network_edges`` dataset, and the layers env modules take as kwargs (``network:``).

``network_edges`` holds each layer of the spec's network at tick 0, written once before the first step.

Edge files are read again from the paths the spec was loaded with (:mod:`engine.network.files` checked
them then); generators make their graph from the spec's seed, so a run and its resume write the same
edges. Shards of :data:`SHARD_EDGES` rows, the first written last, so its presence says all are there.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from engine.network.edges import layer_edges
from engine.society.datasets import NETWORK_EDGES
from engine.spec import EnvModuleSpec, ExperimentSpec
from engine.storage.catalog import Catalog
from engine.storage.replay import ReplayWriter
from engine.storage.run_layout import REPLAY_DIR, RunLocation, replay_key, run_store
from engine.storage.shards import shard_name

__all__ = ["SHARD_EDGES", "adjacency", "module_kwargs", "write_network"]

#: Rows per shard.
SHARD_EDGES = 1_000_000


def _shards(spec: ExperimentSpec, run_id: str) -> list[pa.Table]:
    assert spec.network is not None
    ids = spec.agent_ids()
    tables = []
    for name, layer in spec.network.layers.items():
        path = Path(layer.from_) if layer.from_ is not None else None
        edges = layer_edges(layer, name, ids, spec.seed, path, field=f"network.layers.{name}.from")
        n = len(edges.source)
        for start in range(0, max(n, 1), SHARD_EDGES):
            part = slice(start, start + SHARD_EDGES)
            size = len(edges.source[part])
            tables.append(pa.table({
                "run": pa.repeat(pa.scalar(run_id), size), "layer": pa.repeat(pa.scalar(name), size),
                "step": pa.repeat(pa.scalar(0, pa.int64()), size), "change": pa.repeat(pa.scalar("initial"), size),
                "source": pa.array(edges.source[part], pa.int64()), "target": pa.array(edges.target[part], pa.int64()),
                "directed": pa.repeat(pa.scalar(layer.directed), size),
                "weight": pa.array(edges.weight[part], pa.float64()) if edges.weight is not None else pa.nulls(size, pa.float64()),
                "type": pa.array(edges.kind[part].tolist(), pa.string()) if edges.kind is not None else pa.nulls(size, pa.string()),
            }))
    return tables


def adjacency(spec: ExperimentSpec, name: str) -> dict[int, list[int]]:
    """Layer ``name`` as agent id -> the ids it links to (an undirected edge both ways), ids ascending."""
    assert spec.network is not None
    layer = spec.network.layers[name]
    path = Path(layer.from_) if layer.from_ is not None else None
    edges = layer_edges(layer, name, spec.agent_ids(), spec.seed, path, field=f"network.layers.{name}.from")
    source, target = edges.source, edges.target
    if not layer.directed:
        source, target = np.concatenate([source, target]), np.concatenate([target, source])
    order = np.lexsort((target, source))
    source, target = source[order], target[order]
    starts = np.flatnonzero(np.concatenate([[True], source[1:] != source[:-1]])) if len(source) else np.empty(0, dtype=np.int64)
    return {int(source[a]): target[a:b].tolist() for a, b in zip(starts, [*starts[1:], len(source)], strict=True)}


def module_kwargs(spec: ExperimentSpec, module: EnvModuleSpec) -> dict[str, object]:
    """An env module's kwargs with those its ``network`` names filled from their layers."""
    return {**module.kwargs, **{kwarg: adjacency(spec, layer) for kwarg, layer in module.network.items()}}


def write_network(run_dir: RunLocation, spec: ExperimentSpec, run_id: str) -> bool:
    """Write ``network_edges`` unless the run has it (a resumed run) or the spec has no network; whether it was written."""
    first = shard_name(0, "start-0000")
    if spec.network is None or run_store(run_dir).exists(replay_key(NETWORK_EDGES.name, first)):
        return False
    Catalog(run_store(run_dir).child(REPLAY_DIR)).register(NETWORK_EDGES)
    writer = ReplayWriter(run_dir)
    for number, table in reversed(list(enumerate(_shards(spec, run_id)))):
        writer.write_table(NETWORK_EDGES, shard_name(0, f"start-{number:04d}"), table)
    return True
