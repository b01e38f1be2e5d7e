"""The reference's ``agents`` entries as the spec's agents: id, type, profile and config.

An agent's ``kwargs`` split into ``id`` (must equal ``agent_id``; then dropped), config and profile:

- The reference's agent config keys (:data:`REFERENCE_CONFIG`) map onto what our agents read where
  there is an equivalent (``max_react_turns``; ``memory_context_max_chars`` and
  ``recent_memory_limit`` go into ``memory``). A switch or list that asks for what our agent always
  does (``enable_memory: true``, ``disabled_skill_ids: []``) is accepted and dropped; anything else
  is refused with the reason. The reference documents ``memory_context_max_chars``,
  ``recent_memory_limit`` and ``memory_consolidation_*`` as config although its agents file them
  under the profile; here they are config.
- Our own config keys (the agent class's ``Config``: :class:`~engine.agent.config.AgentConfig`, plus ``game``
  for the game agents and ``rule`` for ``RuleBasedAgent``), flat or in a nested ``config`` dict, are validated and kept.
- Keys of reference machinery we do not have (:data:`NO_EQUIVALENT`) are refused, never dropped.
- Everything else, and a nested ``profile`` dict, is the profile.

A society has one agent class, as in the reference: a second ``agent_type`` is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

from pydantic import TypeAdapter

from engine.agent.memory.thread import MemoryConfig
from engine.agent.registry import agent_type_names, resolve_agent
from engine.reference.problems import Problems, at, mapping, only

if TYPE_CHECKING:
    from engine.agent.base import AgentBase

__all__ = ["NO_EQUIVALENT", "REFERENCE_CONFIG", "convert_agents"]

#: the reference's agent config keys: (our config path, or None: accepted only at ``value``) and why
REFERENCE_CONFIG: dict[str, tuple[tuple[str, ...] | None, Any, str]] = {
    "memory_context_max_chars": (("memory", "max_chars"), None, ""),
    "recent_memory_limit": (("memory", "window_turns"), None, ""),
    "enable_memory": (None, True, "our agents always keep thread memory (AGENT_MEMORY.md) and episodes"),
    "enable_todo_list": (None, True, "our agents always have the TODO list tools (narrow with 'tools')"),
    "memory_consolidation_enabled": (None, True, "our agents always consolidate the thread into AGENT_MEMORY.md "
                                     "once it passes memory.max_chars"),
    "disabled_skill_ids": (None, [], "skills cannot be disabled per agent (narrow the skill tools with 'tools')"),
    "default_activated_skill_ids": (None, [], "skills start inactive; the agent activates them with activate_skill"),
    "extra_skill_paths": (None, [], "skills come from the built-in set and the env modules' skill folders"),
}
#: reference agent kwargs that configure machinery Polis does not have, and why they cannot be honoured
NO_EQUIVALENT: dict[str, str] = {
    "memory_backend": "memory lives in the agent workspace (thread window, AGENT_MEMORY.md, memory/episodes.jsonl); "
    "there is no pluggable memory backend (thread settings go under 'memory')",
    "model_name": "the LLM is chosen per run (llm.default), not per agent",
    "llm": "the LLM is chosen per run (llm.default), not per agent",
    "workspace_path": "the engine places workspaces under <run_dir>/agents",
    "service_proxy": "services are injected by the engine at run time",
    "env_router": "the environment router is built by the engine from the spec",
}
_CONSOLIDATION = "memory_consolidation_"


def _config_adapters(cls: type[AgentBase]) -> tuple[dict[str, TypeAdapter[Any]], bool]:
    """The config keys ``cls`` reads (its ``Config``'s fields) with their validators, and whether other keys may pass
    (a third-party class whose Config allows extra keys)."""
    fields = cls.Config.model_fields
    adapters: dict[str, TypeAdapter[Any]] = {
        name: TypeAdapter(Annotated[field.annotation, *field.metadata] if field.metadata else field.annotation)  # type: ignore[arg-type]
        for name, field in fields.items()}
    return adapters, cls.Config.model_config.get("extra") == "allow"


def _reference_key(key: str, value: Any, here: str, config: dict[str, Any], problems: Problems) -> bool:
    """Map one of the reference's config keys; False when ``key`` is not one."""
    if key not in REFERENCE_CONFIG:
        if key.startswith(_CONSOLIDATION):
            problems.add(here, f"not supported: {REFERENCE_CONFIG['memory_consolidation_enabled'][2]}; "
                         "there is no consolidation schedule to set")
            return True
        return False
    path, expected, why = REFERENCE_CONFIG[key]
    if path is None:
        if value != expected:
            problems.add(here, f"not supported: {why}; only {key}: {expected!r} is accepted")
        return True
    section, field = path
    merged = {**config.get(section, {}), field: value}
    if problems.check(here, TypeAdapter(MemoryConfig), merged):
        config[section] = merged
    else:
        problems.items[-1] = (here, problems.items[-1][1])  # the error's place is the reference key, not ours
    return True


def _claim(key: str, value: Any, here: str, adapters: dict[str, TypeAdapter[Any]], config: dict[str, Any],
           problems: Problems) -> bool:
    """Refuse ``key`` (no equivalent) or take it as config; False when it is neither."""
    if key in NO_EQUIVALENT:
        problems.add(here, f"not supported: {NO_EQUIVALENT[key]}")
    elif key in adapters:
        if key in config:
            problems.add(here, f"given twice: here and in kwargs.config.{key}")
        elif problems.check(here, adapters[key], value):
            config[key] = value
    else:
        return _reference_key(key, value, here, config, problems)
    return True


def _agent(entry: Any, where: str, problems: Problems) -> dict[str, Any] | None:
    entry = mapping(entry, where, "agent_id, agent_type, kwargs", problems)
    if entry is None:
        return None
    only(entry, ("agent_id", "agent_type", "kwargs"), where, problems)
    agent_id, kind = entry.get("agent_id"), entry.get("agent_type")
    kwargs = mapping(entry.get("kwargs"), f"{where}.kwargs", "id, profile fields, config keys", problems)
    if not isinstance(agent_id, int) or isinstance(agent_id, bool):
        problems.add(f"{where}.agent_id", f"an integer agent id is required, got {agent_id!r}")
        agent_id = None
    if kind not in agent_type_names():
        problems.add(f"{where}.agent_type", f"unknown agent type {kind!r}; known: {', '.join(agent_type_names())}")
        return None
    if kwargs is None or agent_id is None:
        return None
    adapters, open_config = _config_adapters(resolve_agent(kind))
    profile = mapping(kwargs.get("profile"), f"{where}.kwargs.profile", "profile fields", problems)
    nested = mapping(kwargs.get("config"), f"{where}.kwargs.config", "config keys", problems)
    profile, config = dict(profile or {}), dict[str, Any]()
    for key, value in (nested or {}).items():
        here = f"{where}.kwargs.config.{key}"
        if _claim(key, value, here, adapters, config, problems):
            continue
        if open_config:
            config[key] = value
        else:
            problems.add(here, f"not supported: {kind} reads the config keys {', '.join(sorted(adapters))}")
    for key, value in kwargs.items():
        here = f"{where}.kwargs.{key}"
        if key in ("profile", "config"):
            continue
        if key == "id":
            if value != agent_id or isinstance(value, bool):
                problems.add(here, f"{value!r} does not match agent_id {agent_id}")
        elif _claim(key, value, here, adapters, config, problems):
            continue
        elif key in profile and profile[key] != value:
            problems.add(here, f"{value!r} conflicts with kwargs.profile.{key} = {profile[key]!r}")
        else:
            profile[key] = value
    return {"id": agent_id, "type": kind, "profile": profile, "config": config}


def convert_agents(raw: Any, label: str, problems: Problems) -> list[dict[str, Any]]:
    """``agents`` as spec agent dicts ``{id, type, profile, config}``; problems are added, not raised."""
    if not isinstance(raw, list) or not raw:
        problems.add(at(label, "agents"), "a non-empty list of {agent_id, agent_type, kwargs} is required")
        return []
    agents: list[dict[str, Any]] = []
    first_seen: dict[int, int] = {}
    for i, entry in enumerate(raw):
        agent = _agent(entry, at(label, "agents", i), problems)
        if agent is None:
            continue
        if agent["id"] in first_seen:
            problems.add(at(label, "agents", i, "agent_id"),
                         f"agent id {agent['id']} appears twice (also agents.{first_seen[agent['id']]})")
        if agents and agent["type"] != agents[0]["type"]:
            problems.add(at(label, "agents", i, "agent_type"),
                         f"{agent['type']} differs from agents.0's {agents[0]['type']}; the reference runs one agent class per society")
        first_seen.setdefault(agent["id"], i)
        agents.append(agent)
    return agents
