"""Agent types by name: built-ins plus the ``polis.agents`` entry points."""

from __future__ import annotations

import importlib
from functools import lru_cache
from importlib.metadata import entry_points
from typing import TYPE_CHECKING, Any, TypeVar

from engine.errors import SpecError

if TYPE_CHECKING:
    from engine.agent.base import AgentBase

__all__ = ["agent_type_names", "check_agent_config", "check_agent_type", "register_agent", "resolve_agent"]

_BUILTIN = {
    "PersonAgent": "engine.agent.person:PersonAgent",
    "PrisonersDilemmaAgent": "engine.agent.contrib.prisoners_dilemma:PrisonersDilemmaAgent",
    "PublicGoodsAgent": "engine.agent.contrib.public_goods:PublicGoodsAgent",
    "TrustGameAgent": "engine.agent.contrib.trust_game:TrustGameAgent",
    "RuleBasedAgent": "engine.agent.contrib.rule_based:RuleBasedAgent",
}
_REGISTERED: dict[str, type[AgentBase]] = {}
_A = TypeVar("_A", bound="type[AgentBase]")


def register_agent(cls: _A, name: str | None = None) -> _A:
    """Register an agent class in this process (tests, notebooks); returns it."""
    _REGISTERED[name or cls.__name__] = cls
    return cls


@lru_cache(maxsize=1)
def _table() -> dict[str, str]:
    # Entry points are scanned once per process: the scan reads every installed distribution.
    table = dict(_BUILTIN)
    for ep in entry_points(group="polis.agents"):
        table.setdefault(ep.name, ep.value)
    return table


def agent_type_names() -> list[str]:
    return sorted({*_table(), *_REGISTERED})


def check_agent_type(name: str) -> str:
    """``name`` if it is a known agent type (a spec field validator).

    Raises:
        ValueError: an unknown type; the message lists the known ones.
    """
    if name not in agent_type_names():
        raise ValueError(f"unknown agent type {name!r}; known: {', '.join(agent_type_names())}")
    return name


def check_agent_config(name: str | None, config: dict[str, Any]) -> dict[str, Any]:
    """``config`` if the agent type ``name`` reads it (a spec field validator; its class's ``Config`` decides).

    Args:
        name: the agent type (None: its own check failed, so there is nothing to check against).
        config: the spec's ``config``.

    Raises:
        PydanticCustomError: the first problem, its key under ``config`` as ``ctx.key`` (a suggestion for a near-miss).
    """
    if name is None:
        return config
    from pydantic import ValidationError

    from engine.agent.config import config_error

    model = resolve_agent(name).Config
    try:
        model.model_validate(config)
    except ValidationError as error:
        raise config_error(name, model, error) from None
    return config


def resolve_agent(name: str) -> type[AgentBase]:
    """The agent class registered as ``name``.

    Raises:
        SpecError: unknown type (names the known ones).
    """
    if name in _REGISTERED:
        return _REGISTERED[name]
    target = _table().get(name)
    if target is None:
        raise SpecError(f"unknown agent type {name!r}; known: {', '.join(agent_type_names())}")
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)
