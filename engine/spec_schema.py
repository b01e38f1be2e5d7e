"""The spec's JSON Schema, with every plugin's config: what ``polis spec-schema`` prints and editors complete from.

``ExperimentSpec``'s own schema says only that an agent's ``config`` (a module's ``kwargs``, the router's
``router_config``, the embedder's ``embedder_config``) is an object. Here each of those objects gets, per plugin
name, an ``if``/``then`` branch: when ``type`` (``router``, ``embedder``) names that plugin, the object must fit its
``Config``, whose schema is added to ``$defs``. A name left out is the field's default.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from engine.spec import ExperimentSpec

__all__ = ["spec_json_schema"]

_REF = "#/$defs/{model}"


def spec_json_schema() -> dict[str, Any]:
    """The JSON Schema of ``ExperimentSpec``, each plugin's config included."""
    from engine.agent.registry import AGENTS
    from engine.env.registry import ENV_MODULES
    from engine.env.routers import ROUTERS
    from engine.env.routers.embedding import embedder_class

    schema = ExperimentSpec.model_json_schema(ref_template=_REF)
    defs: dict[str, Any] = schema.setdefault("$defs", {})
    agents = {name: (f"{name}Config", AGENTS.config_model(name)) for name in AGENTS.names()}
    for model in ("AgentSpec", "PopulationSpec"):
        _branch(defs, defs[model], "type", "config", agents)
    _branch(defs, defs["EnvModuleSpec"], "type", "kwargs",
            {name: (f"{name}Config", ENV_MODULES.config_model(name)) for name in ENV_MODULES.names()})
    environment = defs["EnvironmentSpec"]
    _branch(defs, environment, "router", "router_config",
            {name: (f"{_camel(name)}RouterConfig", ROUTERS.config_model(name)) for name in ROUTERS.names()})
    _branch(defs, environment, "embedder", "embedder_config",
            {name: (embedder_class(name).Config.__name__, embedder_class(name).Config) for name in ("sim", "wordllama", "auto")},
            otherwise=("LiteLLMEmbedderConfig", embedder_class("any/model").Config))
    return schema


def _branch(defs: dict[str, Any], holder: dict[str, Any], tag: str, field: str,
            configs: dict[str, tuple[str, type[BaseModel]]], otherwise: tuple[str, type[BaseModel]] | None = None) -> None:
    """Add to ``holder`` (a model's schema) one ``if``/``then`` per plugin: ``tag`` naming it makes ``field`` its config."""
    default = holder["properties"][tag].get("default")
    branches = []
    for name, (key, model) in configs.items():
        defs[key] = _definition(defs, model)
        named: dict[str, Any] = {"properties": {tag: {"const": name}}, "required": [tag]}
        when = {"anyOf": [named, {"not": {"required": [tag]}}]} if name == default else named
        branches.append({"if": when, "then": {"properties": {field: {"$ref": f"#/$defs/{key}"}}}})
    if otherwise is not None:
        key, model = otherwise
        defs[key] = _definition(defs, model)
        known = {"properties": {tag: {"enum": sorted(configs)}}, "required": [tag]}
        branches.append({"if": {"not": known}, "then": {"properties": {field: {"$ref": f"#/$defs/{key}"}}}})
    holder.setdefault("allOf", []).extend(branches)


def _definition(defs: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s schema, its own ``$defs`` moved into ``defs``."""
    schema = model.model_json_schema(ref_template=_REF)
    for key, value in schema.pop("$defs", {}).items():
        defs.setdefault(key, value)
    return schema


def _camel(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_"))
