"""The spec's ``environment``: its env modules, each by registered type with kwargs (some filled by the run from
the network's layers or the agents' persona fields), and the router that serves their tools."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from engine.router_names import DEFAULT_ROUTER, RouterName

__all__ = ["EnvModuleSpec", "EnvironmentSpec", "check_persona_use"]


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


def _known_env_module(name: str) -> str:
    from engine.env.registry import ENV_MODULES

    return ENV_MODULES.check_name(name)



class EnvModuleSpec(_Frozen):
    """One environment module by registered type name."""

    type: str
    kwargs: dict[str, Any] = Field(default_factory=dict)
    network: dict[str, str] = Field(
        default_factory=dict, description="kwarg -> a layer of the spec's network: the run fills the kwarg with the "
        "layer as an engine.network.graph.Graph (CSR arrays; successors/predecessors of an agent id; an undirected "
        "edge both ways), e.g. {follows: follow} for SocialMediaSpace")

    persona: dict[str, str] = Field(
        default_factory=dict, description="kwarg -> a persona (profile) field: the run fills the kwarg with each "
        "agent's value of it, {agent id: value}, e.g. {groups: party} for SocialMediaSpace")

    _type_known = field_validator("type")(classmethod(lambda cls, v: _known_env_module(v)))

    @field_validator("kwargs")
    @classmethod
    def _kwargs_fit_the_module(cls, kwargs: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        from engine.env.registry import ENV_MODULES

        checked: dict[str, Any] = ENV_MODULES.check_config(info.data.get("type"), kwargs)
        return checked

    @field_validator("network", "persona")
    @classmethod
    def _filled_kwargs_exist(cls, value: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        from engine.env.registry import ENV_MODULES

        name = info.data.get("type")
        if name is None or not value or not ENV_MODULES.known(name):
            return value
        known = sorted(ENV_MODULES.config_model(name).model_fields)
        source = "the network" if info.field_name == "network" else "the agents' personas"
        if unknown := next((kwarg for kwarg in value if kwarg not in known), None):
            raise PydanticCustomError("filled_kwarg", "{name} takes no kwarg '{kwarg}' to fill from {source}; it takes: "
                                      "{known}", {"key": unknown, "name": name, "kwarg": unknown, "known": ", ".join(known),
                                                  "source": source})
        if info.field_name == "persona" and (twice := next((k for k in value if k in info.data.get("network", {})), None)):
            raise PydanticCustomError("filled_kwarg", "{kwarg} is filled from the network already",
                                      {"key": twice, "kwarg": twice})
        return value


#: Settings of the codegen router that were once the environment's own (a spec may still give them there).
_CODEGEN_SETTINGS = {"cache_similarity": 0.85, "final_summary": False}


class EnvironmentSpec(_Frozen):
    """The environment: a router kind and its modules."""

    router: RouterName = Field(DEFAULT_ROUTER, description="the router that maps ask_env instructions to tool calls")
    router_config: dict[str, Any] = Field(
        default_factory=dict, description="the router's own settings (its Config): codegen cache_similarity, "
        "final_summary; plan_execute and two_tier_plan_execute max_replans; search_tool top_k")
    embedder: str = Field("sim", description="codegen template cache embeddings: sim, wordllama, auto, or a litellm model")
    embedder_config: dict[str, Any] = Field(
        default_factory=dict, description="the embedder's settings: dim (sim, wordllama, auto), dimensions (a litellm model)")
    modules: list[EnvModuleSpec] = Field(default_factory=lambda: [EnvModuleSpec(type="MessagingSpace")], min_length=1)
    max_router_steps: int = Field(3, ge=1, le=50, description="tool calls (codegen: code attempts) one ask_env may make")

    @model_validator(mode="before")
    @classmethod
    def _codegen_settings_moved(cls, data: Any) -> Any:
        """``cache_similarity`` and ``final_summary`` beside ``router`` (as specs and stored runs had them) go into
        ``router_config``; for another router, only at their old defaults (what a stored spec of it holds)."""
        if not isinstance(data, dict) or not any(key in data for key in _CODEGEN_SETTINGS):
            return data
        data = dict(data)
        config = dict(data.get("router_config") or {})
        codegen = data.get("router", DEFAULT_ROUTER) == "codegen"
        for key, default in _CODEGEN_SETTINGS.items():
            if key in data:
                value = data.pop(key)
                if codegen:
                    config.setdefault(key, value)
                elif value != default:
                    raise PydanticCustomError("codegen_setting", "{name} is a setting of the codegen router, not of {router}",
                                              {"key": key, "name": key, "router": data.get("router")})
        data["router_config"] = config
        return data

    @field_validator("router_config")
    @classmethod
    def _fits_the_router(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        from engine.env.routers import ROUTERS

        checked: dict[str, Any] = ROUTERS.check_config(info.data.get("router"), value)
        return checked

    @field_validator("embedder_config")
    @classmethod
    def _fits_the_embedder(cls, value: dict[str, Any], info: ValidationInfo) -> dict[str, Any]:
        from engine.env.routers.embedding import embedder_class
        from engine.plugins import check_config

        embedder = info.data.get("embedder")
        if embedder is None:
            return value
        checked: dict[str, Any] = check_config(embedder_class(embedder).Config, value, f"embedder {embedder}")
        return checked


def check_persona_use(modules: Sequence[EnvModuleSpec], persona: Callable[[str], Sequence[object]],
                      fields: Callable[[], Iterable[str]] = tuple) -> None:
    """Each module's ``persona`` kwargs against the agents: a field some agent has, for a kwarg ``kwargs`` leaves out.
    ``persona(field)``: each agent's value of a persona field; ``fields()``: the fields agents have (asked only for a
    refusal's suggestion).

    Raises:
        PydanticCustomError: the first problem, its field path as ``ctx.key``.
    """
    for index, module in enumerate(modules):
        for kwarg, field in module.persona.items():
            key = f"environment.modules.{index}.persona.{kwarg}"
            if kwarg in module.kwargs:
                raise PydanticCustomError("persona_kwarg", "{kwarg} comes from the persona field {field}: leave it out "
                                          "of kwargs", {"key": key, "kwarg": kwarg, "field": field})
            if all(value is None for value in persona(field)):
                known = sorted(set(fields()))
                near = difflib.get_close_matches(field, known, n=1)
                hint = f"; did you mean '{near[0]}'?" if near else ""
                listed = f" (the persona fields: {', '.join(known[:20])})" if known else ""
                raise PydanticCustomError("persona_kwarg", "no agent has a persona field '{field}'{hint}{listed}",
                                          {"key": key, "field": field, "hint": hint, "listed": listed})
