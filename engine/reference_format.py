"""Import the reference system's experiment files (``init_config.json`` + ``steps.yaml``) as an ExperimentSpec.

The reference declares an experiment in two files (seeds 002/003: ``InitConfig`` with its ``AgentConfig``
list, and the CLI's steps file)::

    init_config.json  {"env_modules": [{"module_type", "kwargs"}],
                       "agents": [{"agent_id", "agent_type", "kwargs"}]}
    steps.yaml        {"start_t": <ISO time>, "steps": [run | ask | intervene | questionnaire, ...]}

How they map onto the spec:

- ``module_type`` goes through the environment registry, aliases included (``SimpleSocialSpace`` is our
  ``MessagingSpace``); the spec stores our name. Module ``kwargs`` must be parameters of our module's constructor.
- ``agent_type`` goes through the agent registry (``PersonAgent``). An agent's ``kwargs`` split into
  ``id`` (must equal ``agent_id``; then dropped), the config keys our agents read (``CONFIG_KEYS``, plus ``game``
  for the game agents and ``rule`` for ``RuleBasedAgent``; validated here) together with everything in a nested
  ``config`` dict, and the profile: a nested ``profile`` dict plus every other key. (Agent types from
  other packages may carry any key in a nested ``config``: we cannot know what they read.)
- Keys that configure reference machinery we do not have (``NO_EQUIVALENT``) are refused, never dropped.
- ``start_t`` becomes ``start_time`` (absent: the spec's default); each step maps one to one onto a step model.

Every problem names its place in the reference files, e.g.
``init_config.json:agents.3.kwargs.memory_backend: not supported: ...``; all problems come in one SpecError.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import Field, TypeAdapter, ValidationError

from engine.agent.memory.thread import MemoryConfig
from engine.agent.registry import agent_type_names, resolve_agent
from engine.env.registry import env_module_known, env_module_names, resolve_env_module
from engine.errors import SpecError
from engine.spec import ExperimentSpec, LLMSpec

__all__ = ["CONFIG_KEYS", "NO_EQUIVALENT", "load_reference", "reference_to_spec"]

#: agent config keys every built-in agent reads (engine/agent/base.py, memory/thread.py), with their types
CONFIG_KEYS: dict[str, Any] = {
    "max_react_turns": Annotated[int, Field(ge=1)],
    "max_parse_attempts": Annotated[int, Field(ge=1)],
    "tools": list[str],
    "skill_timeout_s": Annotated[float, Field(gt=0)],
    "memory": MemoryConfig,
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
_STEP_TAGS = {"run", "ask", "intervene", "questionnaire"}
_ADAPTERS = {key: TypeAdapter(kind) for key, kind in CONFIG_KEYS.items()}


class _Problems:
    """Problems collected across both files, each with its place, raised together."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, where: str, message: str) -> None:
        self.items.append((where, message))

    def check(self, where: str, adapter: TypeAdapter[Any], value: Any) -> bool:
        """Validate ``value``; add one problem per pydantic error. True when valid."""
        try:
            adapter.validate_python(value)
        except ValidationError as error:
            for item in error.errors():
                self.add(".".join([where, *map(str, item["loc"])]), item["msg"].removeprefix("Value error, "))
            return False
        return True

    def raise_if_any(self) -> None:
        if self.items:
            error = SpecError("\n".join(f"{where}: {message}" for where, message in self.items))
            error.path = self.items[0][0]
            raise error


def _at(label: str, *parts: Any) -> str:
    return f"{label}:{'.'.join(map(str, parts))}" if parts else label


def _mapping(value: Any, where: str, what: str, problems: _Problems) -> dict[str, Any] | None:
    if value is None:
        return {}
    if not isinstance(value, dict):
        problems.add(where, f"expected a mapping ({what}), got {type(value).__name__}")
        return None
    return value


def _only(entry: dict[str, Any], allowed: tuple[str, ...], where: str, problems: _Problems) -> None:
    """Refuse keys outside ``allowed``; ``where`` is a file label or a place inside one."""
    for key in entry:
        if key not in allowed:
            problems.add(f"{where}.{key}" if ":" in where else _at(where, key), f"unknown key; expected {', '.join(allowed)}")


def _constructor_params(cls: type) -> set[str] | None:
    """Keyword parameters of ``cls(...)``; None when it takes ``**kwargs``."""
    params = list(inspect.signature(cls).parameters.values())
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return None
    return {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _modules(raw: Any, label: str, problems: _Problems) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        problems.add(_at(label, "env_modules"), "a non-empty list of {module_type, kwargs} is required")
        return []
    modules = []
    for i, entry in enumerate(raw):
        where = _at(label, "env_modules", i)
        entry = _mapping(entry, where, "module_type, kwargs", problems)
        if entry is None:
            continue
        _only(entry, ("module_type", "kwargs"), where, problems)
        kind = entry.get("module_type")
        kwargs = _mapping(entry.get("kwargs"), f"{where}.kwargs", "constructor kwargs", problems)
        if not isinstance(kind, str) or not env_module_known(kind):
            problems.add(f"{where}.module_type",
                         f"unknown environment module type {kind!r}; known: {', '.join(env_module_names())}")
            continue
        cls = resolve_env_module(kind)
        ours = kind if kind in env_module_names() else cls.__name__
        accepted = _constructor_params(cls)
        for key in kwargs or {}:
            if accepted is not None and key not in accepted:
                named = ours if ours == kind else f"{ours} (module_type {kind})"
                problems.add(f"{where}.kwargs.{key}",
                             f"not supported by {named}; it takes: {', '.join(sorted(accepted)) or 'no kwargs'}")
        modules.append({"type": ours, "kwargs": dict(kwargs or {})})
    return modules


def _config_adapters(cls: type) -> tuple[dict[str, TypeAdapter[Any]], bool]:
    """The config keys ``cls`` reads with their validators, and whether other config keys may pass (third-party)."""
    from engine.agent.contrib.game import GameAgent
    from engine.agent.contrib.rule_based import RuleBasedAgent, RuleConfig

    adapters = dict(_ADAPTERS)
    if issubclass(cls, GameAgent):
        adapters["game"] = TypeAdapter(cls.game_config_model)
    if issubclass(cls, RuleBasedAgent):
        adapters["rule"] = TypeAdapter(RuleConfig)
    return adapters, not cls.__module__.startswith("engine.")


def _claim(key: str, value: Any, here: str, adapters: dict[str, TypeAdapter[Any]], config: dict[str, Any],
           problems: _Problems) -> bool:
    """Refuse ``key`` (no equivalent) or take it as config; False when it is neither."""
    if key in NO_EQUIVALENT:
        problems.add(here, f"not supported: {NO_EQUIVALENT[key]}")
    elif key in adapters:
        if key in config:
            problems.add(here, f"given twice: here and in kwargs.config.{key}")
        elif problems.check(here, adapters[key], value):
            config[key] = value
    else:
        return False
    return True


def _agent(entry: Any, where: str, problems: _Problems) -> dict[str, Any] | None:
    entry = _mapping(entry, where, "agent_id, agent_type, kwargs", problems)
    if entry is None:
        return None
    _only(entry, ("agent_id", "agent_type", "kwargs"), where, problems)
    agent_id, kind = entry.get("agent_id"), entry.get("agent_type")
    kwargs = _mapping(entry.get("kwargs"), f"{where}.kwargs", "id, profile fields, config keys", problems)
    if not isinstance(agent_id, int) or isinstance(agent_id, bool):
        problems.add(f"{where}.agent_id", f"an integer agent id is required, got {agent_id!r}")
        agent_id = None
    if kind not in agent_type_names():
        problems.add(f"{where}.agent_type", f"unknown agent type {kind!r}; known: {', '.join(agent_type_names())}")
        return None
    if kwargs is None or agent_id is None:
        return None
    adapters, open_config = _config_adapters(resolve_agent(kind))
    profile = _mapping(kwargs.get("profile"), f"{where}.kwargs.profile", "profile fields", problems)
    nested = _mapping(kwargs.get("config"), f"{where}.kwargs.config", "config keys", problems)
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


def _agents(raw: Any, label: str, problems: _Problems) -> list[dict[str, Any]]:
    if not isinstance(raw, list) or not raw:
        problems.add(_at(label, "agents"), "a non-empty list of {agent_id, agent_type, kwargs} is required")
        return []
    agents: list[dict[str, Any]] = []
    first_seen: dict[int, int] = {}
    for i, entry in enumerate(raw):
        agent = _agent(entry, _at(label, "agents", i), problems)
        if agent is None:
            continue
        if agent["id"] in first_seen:
            problems.add(_at(label, "agents", i, "agent_id"),
                         f"agent id {agent['id']} appears twice (also agents.{first_seen[agent['id']]})")
        first_seen.setdefault(agent["id"], i)
        agents.append(agent)
    return agents


def _origin(loc: tuple[Any, ...], config_label: str, steps_label: str) -> str:
    """Where a spec field came from in the reference files."""
    head, rest = (loc[0], list(loc[1:])) if loc else (None, [])
    if head == "start_time":
        return _at(steps_label, "start_t")
    if head == "steps":
        if len(rest) >= 2 and rest[1] in _STEP_TAGS:
            del rest[1]  # the discriminated union's tag is not a place in the file
        return _at(steps_label, "steps", *rest)
    if head == "agents" and len(rest) >= 2:
        index, field, *inner = rest
        named = {"id": ["agent_id"], "type": ["agent_type"]}.get(field, ["kwargs"])
        return _at(config_label, "agents", index, *named, *inner)
    if head == "environment" and len(rest) >= 3 and rest[0] == "modules":
        _, index, field, *inner = rest
        return _at(config_label, "env_modules", index, "module_type" if field == "type" else "kwargs", *inner)
    if head in ("agents", "environment", None):
        return _at(config_label, "agents" if head != "environment" else "env_modules")
    return ".".join(map(str, loc))  # an override: name, llm


def reference_to_spec(
    init_config: dict[str, Any],
    steps: dict[str, Any],
    *,
    name: str | None = None,
    llm: dict[str, Any] | LLMSpec | None = None,
    config_label: str = "init_config.json",
    steps_label: str = "steps.yaml",
) -> ExperimentSpec:
    """Convert the reference's decoded ``init_config`` and ``steps`` into a frozen spec (no IO).

    Args:
        init_config: the decoded ``init_config.json``.
        steps: the decoded ``steps.yaml``.
        name: the experiment name (default ``reference``).
        llm: the LLM clients by role (default: the spec's, ``sim/default``); the reference picks its
            model from global settings, so the files never carry one.
        config_label: how error paths name the config file.
        steps_label: how error paths name the steps file.

    Raises:
        SpecError: every problem found, one per line, each led by its place in the files.
    """
    problems = _Problems()
    config = _mapping(init_config, config_label, "env_modules, agents", problems)
    plan = _mapping(steps, steps_label, "start_t, steps", problems)
    problems.raise_if_any()
    assert config is not None and plan is not None
    _only(config, ("env_modules", "agents"), config_label, problems)
    _only(plan, ("start_t", "steps"), steps_label, problems)
    modules = _modules(config.get("env_modules"), config_label, problems)
    agents = _agents(config.get("agents"), config_label, problems)
    step_list = plan.get("steps")
    if not isinstance(step_list, list) or not step_list:
        problems.add(_at(steps_label, "steps"), "a non-empty list of steps is required")
    problems.raise_if_any()
    data: dict[str, Any] = {
        "name": name or "reference",
        "agents": agents,
        "environment": {"modules": modules},
        "steps": step_list,
    }
    if plan.get("start_t") is not None:
        data["start_time"] = plan["start_t"]
    if llm is not None:
        data["llm"] = llm
    try:
        return ExperimentSpec.model_validate(data)
    except ValidationError as error:
        for item in error.errors():
            problems.add(_origin(tuple(item["loc"]), config_label, steps_label), item["msg"].removeprefix("Value error, "))
    problems.raise_if_any()
    raise AssertionError("unreachable: validation failed without problems")


def _read(path: Path, decode: Any, syntax: str) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise SpecError(f"cannot read {path}: {error}") from None
    try:
        return decode(text)
    except (json.JSONDecodeError, yaml.YAMLError) as error:
        raise SpecError(f"not valid {syntax}: {error}", path=path.name) from None


def load_reference(config_path: str | Path, steps_path: str | Path, **overrides: Any) -> ExperimentSpec:
    """Read the reference's ``init_config.json`` (JSON) and ``steps.yaml`` (YAML) and convert them.

    Args:
        config_path: the ``--config`` file.
        steps_path: the ``--steps`` file.
        overrides: ``name`` (default: the config file's folder name) and ``llm``, as in :func:`reference_to_spec`.

    Raises:
        SpecError: an unreadable file, bad syntax (names the file), or any conversion problem.
    """
    config_path, steps_path = Path(config_path), Path(steps_path)
    init_config = _read(config_path, json.loads, "JSON")
    steps = _read(steps_path, yaml.safe_load, "YAML")
    overrides.setdefault("name", config_path.resolve().parent.name or "reference")
    return reference_to_spec(init_config, steps, config_label=config_path.name, steps_label=steps_path.name, **overrides)
