"""``network:`` in a spec: named layers (follow, friend, family ...), each an edge file or a seeded generator.

A layer's edges join agent ids. An edge file (CSV with a header, Parquet or JSON Lines) has the columns
``source`` and ``target`` and optionally ``weight`` (a number) and ``type`` (a text); it is named relative
to the spec's folder (the service: under ``POLIS_INPUT_DIRS``) and checked when the spec is loaded
(:mod:`engine.network.edges`). A generator (:mod:`engine.network.generators`) makes an undirected graph
over the spec's agents in id order, seeded by the spec's seed and the layer's name; in a ``directed``
layer each of its edges goes both ways.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic_core import PydanticCustomError

__all__ = ["BarabasiAlbert", "ErdosRenyi", "GeneratorSpec", "LayerSpec", "NetworkSpec", "WattsStrogatz", "check_network_use",
           "generator_problem"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class BarabasiAlbert(_Frozen):
    """Preferential attachment: each node after the first ``m + 1`` links ``m`` others, chosen by degree."""

    model: Literal["barabasi_albert"] = "barabasi_albert"
    m: int = Field(ge=1, description="edges each new node adds; fewer than the agents")


class ErdosRenyi(_Frozen):
    """Each pair of agents linked with probability ``p``."""

    model: Literal["erdos_renyi"] = "erdos_renyi"
    p: float = Field(ge=0, le=1, description="the probability of each edge")


class WattsStrogatz(_Frozen):
    """A ring where each agent links its ``k`` nearest, each edge rewired with probability ``p``."""

    model: Literal["watts_strogatz"] = "watts_strogatz"
    k: int = Field(ge=2, description="neighbours on the ring (even, fewer than the agents)")
    p: float = Field(ge=0, le=1, description="the probability each edge is rewired")

    @model_validator(mode="after")
    def _even(self) -> WattsStrogatz:
        if self.k % 2:
            raise ValueError(f"k must be even (half on each side of the ring), not {self.k}")
        return self


GeneratorSpec = Annotated[BarabasiAlbert | ErdosRenyi | WattsStrogatz, Field(discriminator="model")]


class LayerSpec(_Frozen):
    """One layer: its edges, from a file or a generator."""

    model_config = ConfigDict(frozen=True, extra="forbid", serialize_by_alias=True, validate_by_name=True,
                              validate_by_alias=True)

    from_: str | None = Field(None, alias="from", min_length=1, description="an edge file: source, target[, weight, type]")
    generate: GeneratorSpec | None = Field(None, description="a seeded random graph over the agents")
    directed: bool = Field(False, description="an edge from source to target only (a follow); else both ways")
    self_loops: bool = Field(False, description="an agent may link itself (an edge file only)")

    @model_validator(mode="after")
    def _one_source(self) -> LayerSpec:
        if (self.from_ is None) == (self.generate is None):
            raise ValueError("a layer takes its edges from a file ('from') or a generator ('generate'): give one")
        return self


class NetworkSpec(_Frozen):
    """The society's network: layers by name."""

    layers: dict[str, LayerSpec] = Field(min_length=1, description="layer name (follow, friend ...) -> its edges")

    @model_validator(mode="after")
    def _names(self) -> NetworkSpec:
        if bad := next((name for name in self.layers if not name.replace("_", "").isalnum()), None):
            raise ValueError(f"layer name {bad!r}: letters, digits and _ only")
        return self


def generator_problem(layer: LayerSpec, agents: int) -> str | None:
    """Why the layer's generator cannot make a graph over ``agents`` agents (None: it can)."""
    model = layer.generate
    if isinstance(model, BarabasiAlbert):
        return f"m = {model.m} needs more agents than m; there are {agents}" if model.m >= agents else None
    if isinstance(model, WattsStrogatz):
        return f"k = {model.k} needs more agents than k; there are {agents}" if model.k >= agents else None
    return None


def check_network_use(network: NetworkSpec | None, modules: Sequence[Any], agents: int) -> None:
    """A spec's network against the rest of it: each generator fits the agents, and each env module's ``network``
    names a layer there is, for a kwarg its ``kwargs`` leave out.

    Raises:
        PydanticCustomError: the first problem, its field path as ``ctx.key``.
    """
    layers = network.layers if network is not None else {}
    for index, module in enumerate(modules):
        for kwarg, layer in module.network.items():
            if layer not in layers:
                raise PydanticCustomError(
                    "network_layer", "no layer '{layer}' in the spec's network (its layers: {known})",
                    {"key": f"environment.modules.{index}.network.{kwarg}", "layer": layer, "known": ", ".join(layers) or "none"})
            if kwarg in module.kwargs:
                raise PydanticCustomError(
                    "network_layer", "{kwarg} comes from the network layer {layer}: leave it out of kwargs",
                    {"key": f"environment.modules.{index}.network.{kwarg}", "kwarg": kwarg, "layer": layer})
    for name, spec in layers.items():
        if (problem := generator_problem(spec, agents)) is not None:
            raise PydanticCustomError("generator", "{problem}", {"key": f"network.layers.{name}.generate", "problem": problem})
