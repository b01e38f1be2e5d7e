"""``network:`` in a spec: named layers (follow, friend, family ...), each an edge file or a seeded generator.

A layer's edges join agent ids. An edge file (CSV with a header, Parquet or JSON Lines) has the columns
``source`` and ``target`` and optionally ``weight`` (a number) and ``type`` (a text); it is named relative
to the spec's folder (the service: under ``POLIS_INPUT_DIRS``) and checked when the spec is loaded
(:mod:`engine.network.edges`). A generator (:mod:`engine.network.generators`) makes a graph over the spec's
agents in id order, seeded by the spec's seed and the layer's name: undirected, or in a ``directed`` layer
directed (Erdős–Rényi and the block model each ordered pair independently, Barabási–Albert Price's model by
in-degree, Watts–Strogatz and the configuration model each edge oriented at random); ``mutual: true`` makes a
directed layer's generated edges go both ways instead. The edges a generator expects (:func:`expected_edges`) are
bounded before anything is made: by :data:`MAX_LAYER_EDGES` here, and by an owner's quota in the service.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, model_validator
from pydantic_core import PydanticCustomError

__all__ = ["MAX_LAYER_EDGES", "BarabasiAlbert", "BlockModel", "Configuration", "ErdosRenyi", "GeneratorSpec", "LayerSpec", "NetworkSpec",
           "WattsStrogatz", "check_network_use", "count_expected_edges", "expected_edges", "generator_problem"]

#: The most edges one generated layer may expect, whoever runs it (a service's quota is lower): a mean degree of 100
#: over a million agents. Past it the layer's arrays alone take gigabytes, and making and writing it takes minutes.
MAX_LAYER_EDGES = 50_000_000


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


class Configuration(_Frozen):
    """A given degree sequence, its edge ends paired at random: ``degrees`` (one per agent, in id order) or a
    ``distribution`` (degree -> share) each agent's degree is drawn from. Self-loops and repeated edges are
    dropped, so a few agents end with fewer edges (the fit report counts them)."""

    model: Literal["configuration"] = "configuration"
    degrees: list[Annotated[int, Field(ge=0)]] | None = Field(None, min_length=1, description="each agent's degree, in id order")
    distribution: dict[Annotated[int, Field(ge=0)], Annotated[float, Field(ge=0)]] | None = Field(
        None, min_length=1, description="degree -> share of agents (the shares sum to 1)")

    @model_validator(mode="after")
    def _one_source(self) -> Configuration:
        if (self.degrees is None) == (self.distribution is None):
            raise ValueError("a configuration model takes 'degrees' (one per agent) or a 'distribution': give one")
        if self.distribution is not None and abs(sum(self.distribution.values()) - 1) > 1e-6:
            raise ValueError(f"the distribution's shares sum to {sum(self.distribution.values()):g}, not 1")
        return self

    def max_degree(self) -> int:
        return max(self.degrees if self.degrees is not None else self.distribution or {0: 1})


class BlockModel(_Frozen):
    """A stochastic block model over a persona attribute: agents with the same value form a group. ``homophily``
    0 links any two agents alike (an Erdős–Rényi graph); 1 links only agents of a group. In between, the share of
    edges inside groups is ``s0 + homophily * (1 - s0)``, ``s0`` the share with no homophily, so ``homophily`` is
    the pooled Coleman index of the graph it expects: the fit report sets the achieved one beside it
    (``coleman_index_pooled``), and each group's own index (``coleman_index[<group>]``) against its expectation."""

    model: Literal["block"] = "block"
    attribute: str = Field(min_length=1, description="the persona field whose values make the groups")
    mean_degree: float = Field(gt=0, description="the expected number of edges per agent")
    homophily: float = Field(ge=0, le=1, description="0: groups mix at random; 1: edges only inside groups")


GeneratorSpec = Annotated[BarabasiAlbert | ErdosRenyi | WattsStrogatz | Configuration | BlockModel,
                          Field(discriminator="model")]


class LayerSpec(_Frozen):
    """One layer: its edges, from a file or a generator."""

    model_config = ConfigDict(frozen=True, extra="forbid", serialize_by_alias=True, validate_by_name=True,
                              validate_by_alias=True)

    from_: str | None = Field(None, alias="from", min_length=1, description="an edge file: source, target[, weight, type]")
    generate: GeneratorSpec | None = Field(None, description="a seeded random graph over the agents")
    directed: bool = Field(False, description="an edge from source to target only (a follow); else both ways")
    mutual: bool = Field(False, description="a directed layer's generated edges each both ways (a generator only)")
    self_loops: bool = Field(False, description="an agent may link itself (an edge file only)")

    @model_validator(mode="after")
    def _one_source(self) -> LayerSpec:
        if (self.from_ is None) == (self.generate is None):
            raise ValueError("a layer takes its edges from a file ('from') or a generator ('generate'): give one")
        if self.mutual and not (self.directed and self.generate is not None):
            raise ValueError("mutual: true makes a directed layer's generated edges go both ways: it needs "
                             "directed: true and a generator (an edge file's edges are as the file has them)")
        return self


class NetworkSpec(_Frozen):
    """The society's network: layers by name."""

    layers: dict[str, LayerSpec] = Field(min_length=1, description="layer name (follow, friend ...) -> its edges")

    @model_validator(mode="after")
    def _names(self) -> NetworkSpec:
        if bad := next((name for name in self.layers if not name.replace("_", "").isalnum()), None):
            raise ValueError(f"layer name {bad!r}: letters, digits and _ only")
        return self


_GENERATOR: TypeAdapter[Any] = TypeAdapter(GeneratorSpec)


def expected_edges(model: BarabasiAlbert | ErdosRenyi | WattsStrogatz | Configuration | BlockModel, agents: int) -> float:
    """The undirected edges ``model`` expects over ``agents`` agents (a configuration model: half its degree sum).

    Each grows with the agents, so the largest run of a sweep expects the most.
    """
    if isinstance(model, BarabasiAlbert):
        return model.m + max(agents - model.m - 1, 0) * model.m
    if isinstance(model, ErdosRenyi):
        return model.p * agents * (agents - 1) / 2
    if isinstance(model, WattsStrogatz):
        return agents * model.k / 2
    if isinstance(model, Configuration):
        if model.degrees is not None:
            return sum(model.degrees) / 2
        assert model.distribution is not None
        return agents * sum(degree * share for degree, share in model.distribution.items()) / 2
    return model.mean_degree * agents / 2


def count_expected_edges(generate: Any, agents: int) -> int:
    """The edges a layer's ``generate`` as submitted (decoded, not yet validated) expects over ``agents`` agents,
    rounded up; 0 for one that validation refuses anyway."""
    try:
        model = _GENERATOR.validate_python(generate)
    except ValidationError:
        return 0
    return math.ceil(expected_edges(model, agents))


def generator_problem(layer: LayerSpec, agents: int) -> str | None:
    """Why the layer's generator cannot make a graph over ``agents`` agents (None: it can)."""
    model = layer.generate
    if model is not None and (edges := expected_edges(model, agents)) > MAX_LAYER_EDGES:
        return (f"over {agents:,} agents this generator expects {edges:,.0f} edges; a generated layer may have at "
                f"most {MAX_LAYER_EDGES:,}")
    if isinstance(model, BarabasiAlbert):
        return f"m = {model.m} needs more agents than m; there are {agents}" if model.m >= agents else None
    if isinstance(model, WattsStrogatz):
        return f"k = {model.k} needs more agents than k; there are {agents}" if model.k >= agents else None
    if isinstance(model, Configuration):
        if model.degrees is not None and len(model.degrees) != agents:
            return f"degrees lists {len(model.degrees)} degrees, one per agent: there are {agents} agents"
        if model.max_degree() >= agents:
            return f"a degree of {model.max_degree()} needs more agents than that; there are {agents}"
    if isinstance(model, BlockModel) and model.mean_degree >= agents:
        return f"mean_degree = {model.mean_degree:g} needs more agents than that; there are {agents}"
    return None


def check_network_use(network: NetworkSpec | None, modules: Sequence[Any], agents: int,
                      persona: Callable[[str], Sequence[object]], fields: Callable[[], Iterable[str]] = tuple) -> None:
    """A spec's network against the rest of it: each generator fits the agents (a block model's attribute is
    a persona field, and its probabilities are at most 1), and each env module's ``network`` names a layer
    there is, for a kwarg its ``kwargs`` leave out. ``persona(field)``: each agent's value of a persona field;
    ``fields()``: the fields agents have (asked only for a refusal's suggestion).

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
        key, problem = f"network.layers.{name}.generate", generator_problem(spec, agents)
        if problem is None and isinstance(spec.generate, BlockModel):
            values = persona(spec.generate.attribute)
            if all(value is None for value in values):
                key, problem = f"{key}.attribute", f"no agent has a persona field {spec.generate.attribute!r}"
                near = difflib.get_close_matches(spec.generate.attribute, sorted(set(fields())), n=1)
                problem += f"; did you mean {near[0]!r}?" if near else ""
            else:
                problem = _block_problem(spec.generate, values)
        if problem is not None:
            raise PydanticCustomError("generator", "{problem}", {"key": key, "problem": problem})


def _block_problem(model: BlockModel, values: Sequence[object]) -> str | None:
    """Why a block model cannot be made from the agents' values of its attribute (None: it can)."""
    from engine.network.generators import block_probabilities, group_codes

    within, between = block_probabilities(group_codes(values), model.mean_degree, model.homophily)
    if within > 1 or between > 1:
        return (f"mean_degree {model.mean_degree:g} with homophily {model.homophily:g} needs edge probabilities of "
                f"{within:.3g} within groups and {between:.3g} between them: at most 1 each; lower one of them")
    return None
