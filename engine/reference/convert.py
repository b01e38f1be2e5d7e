"""Import the reference system's experiment files (``init_config.json`` + ``steps.yaml``) as an ExperimentSpec.

The reference declares an experiment in two files::

    init_config.json  {"env_modules": [{"module_type", "kwargs"}],
                       "agents": [{"agent_id", "agent_type", "kwargs"}],
                       "codegen_router": {"final_summary_enabled": true}}      (JSON or YAML)
    steps.yaml        {"start_t": <ISO time>, "steps": [run | ask | intervene | questionnaire, ...]}

How they map onto the spec:

- ``env_modules``: :mod:`engine.reference.modules` (type names, kwargs, one module per type).
- ``agents``: :mod:`engine.reference.agents` (profile and config, one agent class).
- ``SimpleSocialSpace``'s ``agent_id_name_pairs`` declare the agents: every pair names a listed
  agent and every listed agent has a pair; an agent whose profile has no ``name`` takes its pair's.
- The reference always routes with generated code: the spec's router is ``codegen``, and
  ``codegen_router.final_summary_enabled`` (default true, also when ``codegen_router`` is absent) is
  ``environment.router_config.final_summary``: one more coder call turns the executed code's results into the answer.
- ``start_t`` becomes ``start_time`` (absent: the spec's default); each step maps one to one onto a step model.

Every problem names its place in the reference files, e.g.
``init_config.json:agents.3.kwargs.memory_backend: not supported: ...``; all problems come in one SpecError.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from engine.errors import SpecError
from engine.reference.agents import convert_agents
from engine.reference.modules import convert_modules
from engine.reference.problems import Problems, at, mapping, only
from engine.spec import ExperimentSpec, LLMSpec

__all__ = ["load_reference", "reference_to_spec"]

_STEP_TAGS = {"run", "ask", "intervene", "questionnaire"}
_NAMES = "agent_id_name_pairs"


def _origin(loc: tuple[Any, ...], config_label: str, steps_label: str) -> str:
    """Where a spec field came from in the reference files."""
    head, rest = (loc[0], list(loc[1:])) if loc else (None, [])
    if head == "start_time":
        return at(steps_label, "start_t")
    if head == "steps":
        if len(rest) >= 2 and rest[1] in _STEP_TAGS:
            del rest[1]  # the discriminated union's tag is not a place in the file
        return at(steps_label, "steps", *rest)
    if head == "agents" and len(rest) >= 2:
        index, field, *inner = rest
        named = {"id": ["agent_id"], "type": ["agent_type"]}.get(field, ["kwargs"])
        return at(config_label, "agents", index, *named, *inner)
    if head == "environment" and len(rest) >= 3 and rest[0] == "modules":
        _, index, field, *inner = rest
        return at(config_label, "env_modules", index, "module_type" if field == "type" else "kwargs", *inner)
    if head in ("agents", "environment", None):
        return at(config_label, "agents" if head != "environment" else "env_modules")
    return ".".join(map(str, loc))  # an override: name, llm


def _router(raw: Any, label: str, problems: Problems) -> dict[str, Any]:
    """``codegen_router`` as the spec's environment router settings."""
    where = at(label, "codegen_router")
    entry = mapping(raw, where, "final_summary_enabled", problems)
    if entry is None:
        return {}
    only(entry, ("final_summary_enabled",), where, problems)
    enabled = entry.get("final_summary_enabled", True)
    if not isinstance(enabled, bool):
        problems.add(f"{where}.final_summary_enabled", f"true or false is required, got {enabled!r}")
        return {}
    return {"router": "codegen", "router_config": {"final_summary": enabled}}


def _declared_names(modules: list[dict[str, Any]], agents: list[dict[str, Any]], label: str, problems: Problems) -> None:
    """Check ``agent_id_name_pairs`` against the agents; give unnamed agents their declared name."""
    by_id = {agent["id"]: agent for agent in agents}
    for index, module in enumerate(modules):
        pairs = module["kwargs"].get(_NAMES)
        if pairs is None:
            continue
        where = at(label, "env_modules", index, "kwargs", _NAMES)
        if not isinstance(pairs, list) or not all(isinstance(p, list | tuple) and len(p) == 2 for p in pairs):
            problems.add(where, "a list of [agent_id, name] pairs is required")
            continue
        for i, (agent_id, name) in enumerate(pairs):
            agent = by_id.get(agent_id)
            if agent is None:
                problems.add(f"{where}.{i}", f"agent {agent_id!r} is not in agents")
            elif isinstance(name, str):
                agent["profile"].setdefault("name", name)
        missing = sorted(set(by_id) - {p[0] for p in pairs})
        if missing:
            problems.add(where, f"agents {missing} have no pair: the pairs declare the society's agents")


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
            model from its environment variables (:mod:`engine.reference.environment`), so the files never carry one.
        config_label: how error paths name the config file.
        steps_label: how error paths name the steps file.

    Raises:
        SpecError: every problem found, one per line, each led by its place in the files.
    """
    problems = Problems()
    config = mapping(init_config, config_label, "env_modules, agents", problems)
    plan = mapping(steps, steps_label, "start_t, steps", problems)
    problems.raise_if_any()
    assert config is not None and plan is not None
    only(config, ("env_modules", "agents", "codegen_router"), config_label, problems)
    only(plan, ("start_t", "steps"), steps_label, problems)
    modules = convert_modules(config.get("env_modules"), config_label, problems)
    agents = convert_agents(config.get("agents"), config_label, problems)
    router = _router(config.get("codegen_router"), config_label, problems)
    _declared_names(modules, agents, config_label, problems)
    step_list = plan.get("steps")
    if not isinstance(step_list, list) or not step_list:
        problems.add(at(steps_label, "steps"), "a non-empty list of steps is required")
    problems.raise_if_any()
    data: dict[str, Any] = {
        "name": name or "reference",
        "agents": agents,
        "environment": {"modules": modules, **router},
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


def _decode_config(path: Path) -> Any:
    """``init_config`` is JSON, or YAML when its name says so."""
    if path.suffix.lower() in (".yaml", ".yml"):
        return _read(path, yaml.safe_load, "YAML")
    return _read(path, json.loads, "JSON")


def load_reference(config_path: str | Path, steps_path: str | Path, **overrides: Any) -> ExperimentSpec:
    """Read the reference's ``init_config.json`` (JSON, or YAML named ``*.yaml``) and ``steps.yaml`` and convert them.

    Args:
        config_path: the ``--config`` file.
        steps_path: the ``--steps`` file.
        overrides: ``name`` (default: the config file's folder name) and ``llm``, as in :func:`reference_to_spec`.

    Raises:
        SpecError: an unreadable file, bad syntax (names the file), or any conversion problem.
    """
    config_path, steps_path = Path(config_path), Path(steps_path)
    init_config = _decode_config(config_path)
    steps = _read(steps_path, yaml.safe_load, "YAML")
    overrides.setdefault("name", config_path.resolve().parent.name or "reference")
    return reference_to_spec(init_config, steps, config_label=config_path.name, steps_label=steps_path.name, **overrides)
