"""The network datasets. ``network_fit``: how each generated layer fits its model, written with the first.
``network_edges``: each layer at tick 0 (the driver writes it) and every edge change after (the env
module that holds the layer writes those, at their tick, with ``change`` 'added' or 'removed', one direction each).

The column descriptions are as the first runs stored them: a stored run's catalog must match to be resumed."""

from __future__ import annotations

from engine.storage.catalog import RUN_COLUMN, Column, DatasetSchema

__all__ = ["NETWORK_EDGES", "NETWORK_FIT", "NETWORK_MEASURES"]

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

NETWORK_FIT = DatasetSchema(
    name="network_fit",
    kind="society",
    description="how each generated layer fits its model: a measure's target beside what the graph achieved "
                "(engine.network.fit)",
    columns=(
        RUN_COLUMN,
        Column(name="layer", type="string", description="the layer"),
        Column(name="model", type="string", description="its generator (barabasi_albert, block ...)"),
        Column(name="measure", type="string", description="edges, mean_degree, degree_p50, clustering, transitivity, components, coleman_index_pooled ..."),
        Column(name="target", type="float64", description="what the model expects over these agents (null: no closed form)"),
        Column(name="achieved", type="float64", description="what the generated graph has"),
        Column(name="note", type="string", description="how the measure was taken, where it needs saying"),
    ),
)

NETWORK_MEASURES = DatasetSchema(
    name="network_measures",
    kind="env",
    description="a layer's measures after each step, changes included (engine.network.measures)",
    columns=(
        RUN_COLUMN,
        Column(name="layer", type="string", description="the layer"),
        Column(name="step", type="int64", description="the step after which it was measured"),
        Column(name="t", type="timestamp", description="simulated time at the end of the step"),
        Column(name="edges", type="float64", description="directed edges (an undirected edge counts twice)"),
        Column(name="mean_degree", type="float64", description="mean out-degree"),
        Column(name="in_degree_p50", type="float64", description="median in-degree (followers)"),
        Column(name="in_degree_p99", type="float64", description="99th percentile of the in-degree"),
        Column(name="in_degree_max", type="float64", description="the most followed agent's in-degree"),
        Column(name="out_degree_max", type="float64", description="the largest out-degree"),
        Column(name="reciprocity", type="float64", description="share of edges whose reverse is an edge"),
        Column(name="clustering", type="float64", description="mean local clustering of a seeded sample of agents"),
        Column(name="ei_index", type="float64",
               description="E-I index over the module's groups (between less inside, over all edges); null without groups"),
    ),
)
