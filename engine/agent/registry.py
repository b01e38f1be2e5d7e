"""Agent types by name: built-ins plus the ``polis.agents`` entry points (:class:`~engine.plugins.PluginRegistry`).

Each class's ``Config`` (:mod:`engine.agent.config`) is what a spec's ``config`` for it may hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.plugins import PluginRegistry

if TYPE_CHECKING:
    from engine.agent.base import AgentBase

__all__ = ["AGENTS", "agent_type_names", "check_agent_config", "check_agent_type", "register_agent", "resolve_agent"]

AGENTS: PluginRegistry[AgentBase] = PluginRegistry("agent type", {
    "PersonAgent": "engine.agent.person:PersonAgent",
    "PrisonersDilemmaAgent": "engine.agent.contrib.prisoners_dilemma:PrisonersDilemmaAgent",
    "PublicGoodsAgent": "engine.agent.contrib.public_goods:PublicGoodsAgent",
    "TrustGameAgent": "engine.agent.contrib.trust_game:TrustGameAgent",
    "RuleBasedAgent": "engine.agent.contrib.rule_based:RuleBasedAgent",
}, group="polis.agents")


def register_agent(cls: type[AgentBase], name: str | None = None) -> type[AgentBase]:
    """Register an agent class in this process (tests, notebooks); returns it."""
    return AGENTS.register(cls, name)


def agent_type_names() -> list[str]:
    return AGENTS.names()


def resolve_agent(name: str) -> type[AgentBase]:
    """The agent class registered as ``name``.

    Raises:
        SpecError: unknown type (names the known ones).
    """
    return AGENTS.resolve(name)


def check_agent_type(name: str) -> str:
    """``name`` if it is a known agent type (a spec field validator)."""
    return AGENTS.check_name(name)


def check_agent_config(name: str | None, config: dict[str, Any]) -> dict[str, Any]:
    """``config`` if the agent type ``name`` reads it (a spec field validator; its class's ``Config`` decides)."""
    checked: dict[str, Any] = AGENTS.check_config(name, config)
    return checked
