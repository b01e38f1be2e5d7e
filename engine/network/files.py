"""The edge files a spec's network names: located when the spec is loaded, checked against its agents.

A layer's ``from`` is resolved as a population's table is (:data:`engine.population.Locate`: the spec's
folder for the CLI, ``POLIS_INPUT_DIRS`` for the service) and written back as the resolved path, so the
run reads the same file wherever it starts. The file itself stays out of the spec: it may hold millions of
edges. :func:`check_network` reads each file once the agents are known and refuses it with the row, column
and id at fault; the run then copies its edges into the ``network_edges`` dataset.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.network.edges import read_edge_file

if TYPE_CHECKING:
    import numpy as np

    from engine.network.spec import NetworkSpec
    from engine.population.files import Locate

__all__ = ["check_network", "locate_network_files"]


def locate_network_files(data: Any, locate: Locate) -> Any:
    """``data`` (a decoded spec) with each layer's ``from`` resolved by ``locate`` (a copy; ``data`` is unchanged)."""
    network = data.get("network") if isinstance(data, Mapping) else None
    if not isinstance(network, Mapping) or not isinstance(layers := network.get("layers"), Mapping):
        return data
    resolved = {}
    for name, layer in layers.items():
        if isinstance(layer, Mapping) and isinstance(layer.get("from"), str) and layer["from"]:
            layer = {**layer, "from": str(locate(f"network.layers.{name}.from", layer["from"]))}
        resolved[name] = layer
    return {**data, "network": {**network, "layers": resolved}}


def check_network(network: NetworkSpec | None, agent_ids: np.ndarray) -> None:
    """Read every edge file of ``network`` and check it against the agents (a spec's ``agent_ids()``).

    Raises:
        NetworkFileError: a file that cannot be read, or an edge it cannot hold (with its row, column and id).
    """
    if network is None:
        return
    ids = agent_ids
    for name, layer in network.layers.items():
        if layer.from_ is not None:
            read_edge_file(Path(layer.from_), field=f"network.layers.{name}.from", label=Path(layer.from_).name,
                           agent_ids=ids, layer=layer)
