"""What an agent's ``config`` may hold, as a pydantic model per agent class, checked when a spec is parsed.

Every agent class has a ``Config``: :class:`AgentConfig` for what :class:`~engine.agent.base.AgentBase` reads,
and a subclass of it where a class reads more (a game's ``game``, :class:`RuleBasedAgent`'s ``rule``). An agent
class of your own that reads keys of its own declares them the same way::

    class Trader(PersonAgent):
        class Config(AgentConfig):
            risk: float = Field(0.5, ge=0, le=1, description="how much of its cash it stakes")

A key the class does not declare is a spec error at submit, with its path (``agents.3.config.max_react_turn``) and
the nearest declared name. ``polis spec-schema`` (and the spec reference) list every class's fields.
"""

from __future__ import annotations

import difflib
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError

from engine.agent.memory.thread import MemoryConfig

__all__ = ["AgentConfig", "config_error"]


class AgentConfig(BaseModel):
    """The config keys every built-in agent reads (``engine/agent/base.py``, ``memory/thread.py``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_react_turns: int = Field(4, ge=1, le=1000, description="ReAct turns an agent may take in one step")
    max_parse_attempts: int = Field(3, ge=1, le=100, description="tries for a schema-valid decision before the step fails")
    tools: list[str] | None = Field(None, description="the tools offered (default: every tool of the agent)")
    skill_timeout_s: float = Field(10.0, gt=0, description="seconds a skill script may run")
    env_template_mode: bool = Field(True, description="ask_env instructions may use the env's prompt templates")
    memory: MemoryConfig = Field(default_factory=MemoryConfig, description="thread memory: window, compaction, ceiling")


def config_error(agent_type: str, model: type[BaseModel], error: ValidationError) -> PydanticCustomError:
    """The first problem of ``error`` as a spec error naming its key under ``config`` (``ctx.key``, dotted), with the
    nearest declared name for an unknown one."""
    item = error.errors()[0]
    loc = [str(part) for part in item["loc"]]
    message = item["msg"].removeprefix("Value error, ")
    if item["type"] == "extra_forbidden":
        known = _fields_at(model, loc[:-1])
        near = difflib.get_close_matches(loc[-1], known, n=1)
        hint = f"did you mean {near[0]!r}? " if near else ""
        message = f"{agent_type} reads no config key {loc[-1]!r}; {hint}it reads: {', '.join(known) or 'none'}"
    return PydanticCustomError("agent_config", "{message}", {"key": ".".join(loc), "message": message})


def _fields_at(model: type[BaseModel], path: list[str]) -> list[str]:
    """The field names of the model at ``path`` under ``model`` (nested models only), sorted."""
    here: Any = model
    for part in path:
        field = here.model_fields.get(part) if isinstance(here, type) and issubclass(here, BaseModel) else None
        if field is None:
            return []
        here = field.annotation
    return sorted(here.model_fields) if isinstance(here, type) and issubclass(here, BaseModel) else []
