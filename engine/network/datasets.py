"""The ``network_edges`` dataset: each layer at tick 0 (the driver writes it) and every edge change after (the env
module that holds the layer writes those, at their tick, with ``change`` 'added' or 'removed', one direction each).

The column descriptions are as the first runs stored them: a stored run's catalog must match to be resumed."""

from __future__ import annotations

from engine.storage.catalog import RUN_COLUMN, Column, DatasetSchema

__all__ = ["NETWORK_EDGES"]

NETWORK_EDGES = DatasetSchema(
    name="network_edges",
    kind="society",
    description="the network: each layer's edges at tick 0 (change 'initial'), as its file or generator made them",
    columns=(
        RUN_COLUMN,
        Column(name="layer", type="string", description="the layer (follow, friend ...)"),
        Column(name="step", type="int64", description="the tick of the change (0: the start)"),
        Column(name="change", type="string", description="initial"),
        Column(name="source", type="int64", description="an agent id"),
        Column(name="target", type="int64", description="an agent id (an undirected layer holds each edge once)"),
        Column(name="directed", type="bool", description="the layer's edges go from source to target only"),
        Column(name="weight", type="float64", description="the file's weight, where it has one"),
        Column(name="type", type="string", description="the file's type, where it has one"),
    ),
)
