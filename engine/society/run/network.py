"""A run's network: the layers env modules take as kwargs (``network:``), and the ``network_edges`` dataset.
Env modules' ``persona:`` kwargs are filled here too, from the same lookup of the agents' persona fields (a block
model's groups are one): building every agent's profile is seconds per 100,000 agents, so each field is read once.

:class:`SpecNetwork` reads (or generates) each layer of the spec's network once, for both. ``network_edges``
holds each layer at tick 0, written once before the first step as start shards
(:mod:`engine.society.run.start_shards`) of :data:`SHARD_EDGES` rows. Edge files are read again from the paths the
spec was loaded with (:mod:`engine.network.files` checked them then); generators make their graph from the
spec's seed, so a run and its resume see the same edges.

A run makes its network with :func:`start_network`, handed off to a worker (:meth:`~engine.society.shells.base.Shell.offload`):
it calls its checkpoint before each layer is made, each graph built and each dataset written, so a cancelled run's
network stops there.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from engine.network.datasets import NETWORK_FIT
from engine.network.edges import LayerEdges, layer_edges
from engine.network.fit import fit_rows
from engine.network.graph import Graph
from engine.society.datasets import NETWORK_EDGES
from engine.society.run.start_shards import has_start_shards, write_start_shards
from engine.spec import EnvModuleSpec, ExperimentSpec
from engine.storage.run_layout import RunLocation

__all__ = ["SHARD_EDGES", "SpecNetwork", "start_network"]

#: Rows per shard.
SHARD_EDGES = 1_000_000


def _go_on() -> None:
    """A checkpoint that never stops the work."""


class SpecNetwork:
    """The spec's network layers, each read from its file or generated on first use, then kept.

    Args:
        spec: the experiment.
        checkpoint: called before each layer is made, each graph built and each dataset written; it raises to stop
            the work (:class:`~engine.errors.WorkCancelledError`, from :meth:`~engine.society.shells.base.Shell.offload`).
    """

    def __init__(self, spec: ExperimentSpec, checkpoint: Callable[[], None] = _go_on) -> None:
        self._spec = spec
        self._edges: dict[str, LayerEdges] = {}
        self._persona = cache(spec.persona_values)
        self._checkpoint = checkpoint

    def edges(self, name: str) -> LayerEdges:
        """Layer ``name``'s edges (an undirected edge once)."""
        if name not in self._edges:
            self._checkpoint()
            spec = self._spec
            assert spec.network is not None
            layer = spec.network.layers[name]
            path = Path(layer.from_) if layer.from_ is not None else None
            self._edges[name] = layer_edges(layer, name, spec.agent_ids(), spec.seed, path, field=f"network.layers.{name}.from",
                                            persona=self._persona)
        return self._edges[name]

    def graph(self, name: str) -> Graph:
        """Layer ``name`` as a :class:`Graph` over every agent (an undirected edge both ways)."""
        assert self._spec.network is not None
        edges = self.edges(name)
        self._checkpoint()
        source, target = edges.source, edges.target
        if not self._spec.network.layers[name].directed:
            source, target = np.concatenate([source, target]), np.concatenate([target, source])
        return Graph(source, target, np.asarray(self._spec.agent_ids(), dtype=np.int64), layer=name)

    def module_kwargs(self, module: EnvModuleSpec) -> dict[str, object]:
        """An env module's kwargs with those its ``network`` names filled from their layers, and those its ``persona``
        names with each agent's value of the field (``{agent id: value}``, over the agents that have one)."""
        ids = self._spec.agent_ids().tolist() if module.persona else []
        filled: dict[str, Any] = {kwarg: {agent: value for agent, value in zip(ids, self._persona(field), strict=True)
                                          if value is not None} for kwarg, field in module.persona.items()}
        return {**module.kwargs, **{kwarg: self.graph(layer) for kwarg, layer in module.network.items()}, **filled}

    def write(self, run_dir: RunLocation, run_id: str) -> bool:
        """Write ``network_edges`` unless the run has it (a resumed run) or the spec has no network; whether it was written."""
        network = self._spec.network
        if network is None or has_start_shards(run_dir, NETWORK_EDGES):
            return False
        tables = [table for name, layer in network.layers.items() for table in _tables(self.edges(name), name, layer.directed, run_id)]
        self._checkpoint()
        write_start_shards(run_dir, NETWORK_EDGES, tables)
        if fit := [row for name in network.layers for row in self.fit(name)]:
            self._checkpoint()
            write_start_shards(run_dir, NETWORK_FIT, [pa.Table.from_pylist([{"run": run_id, **row} for row in fit],
                                                                           schema=NETWORK_FIT.arrow_schema())])
        return True

    def fit(self, name: str) -> list[dict[str, object]]:
        """Layer ``name``'s ``network_fit`` rows (none for a layer from a file)."""
        assert self._spec.network is not None
        model = self._spec.network.layers[name].generate
        if model is None:
            return []
        self._checkpoint()
        from engine.network.generators import group_codes
        from engine.network.spec import BlockModel

        ids = np.sort(np.asarray(self._spec.agent_ids(), dtype=np.int64))
        edges = self.edges(name)
        layer = self._spec.network.layers[name]
        source, target = np.searchsorted(ids, edges.source), np.searchsorted(ids, edges.target)
        groups, names = None, None
        if isinstance(model, BlockModel):
            order = np.argsort(np.asarray(self._spec.agent_ids(), dtype=np.int64), kind="stable")
            values = self._persona(model.attribute)
            ordered = [values[i] for i in order]
            groups = group_codes(ordered)
            names = list({repr(value): str(value) for value in ordered}.values())  # numbered as group_codes numbers them
        return [{"layer": name, "model": model.model, "measure": row.measure, "target": row.target,
                 "achieved": row.achieved, "note": row.note}
                for row in fit_rows(model, len(ids), source, target, directed=layer.directed, mutual=layer.mutual,
                                    asked=edges.asked, groups=groups, group_names=names, seed=self._spec.seed)]


def start_network(spec: ExperimentSpec, run_dir: RunLocation, run_id: str,
                  checkpoint: Callable[[], None] = _go_on) -> tuple[tuple[str, dict[str, object]], ...]:
    """Make a run's network: each env module's type and kwargs with its layers and persona fields filled
    (:meth:`SpecNetwork.module_kwargs`), after writing ``network_edges`` and ``network_fit`` unless the run has them.

    Raises:
        WorkCancelledError: ``checkpoint`` stopped the work.
    """
    network = SpecNetwork(spec, checkpoint)
    network.write(run_dir, run_id)
    return tuple((module.type, network.module_kwargs(module)) for module in spec.environment.modules)


def _tables(edges: LayerEdges, name: str, directed: bool, run_id: str) -> list[pa.Table]:
    """One layer's ``network_edges`` rows, :data:`SHARD_EDGES` to a table (an empty layer: one empty table)."""
    tables = []
    for start in range(0, max(len(edges.source), 1), SHARD_EDGES):
        part = slice(start, start + SHARD_EDGES)
        size = len(edges.source[part])
        tables.append(pa.table({
            "run": pa.repeat(pa.scalar(run_id), size), "layer": pa.repeat(pa.scalar(name), size),
            "step": pa.repeat(pa.scalar(0, pa.int64()), size), "change": pa.repeat(pa.scalar("initial"), size),
            "source": pa.array(edges.source[part], pa.int64()), "target": pa.array(edges.target[part], pa.int64()),
            "directed": pa.repeat(pa.scalar(directed), size),
            "weight": pa.array(edges.weight[part], pa.float64()) if edges.weight is not None else pa.nulls(size, pa.float64()),
            "type": pa.array(edges.kind[part].tolist(), pa.string()) if edges.kind is not None else pa.nulls(size, pa.string()),
        }))
    return tables
