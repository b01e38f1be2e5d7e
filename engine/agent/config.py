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

from pydantic import BaseModel, ConfigDict, Field

from engine.agent.memory.thread import MemoryConfig

__all__ = ["AgentConfig"]


class AgentConfig(BaseModel):
    """The config keys every built-in agent reads (``engine/agent/base.py``, ``memory/thread.py``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_react_turns: int = Field(4, ge=1, le=1000, description="ReAct turns an agent may take in one step")
    max_parse_attempts: int = Field(3, ge=1, le=100, description="tries for a schema-valid decision before the step fails")
    tools: list[str] | None = Field(None, description="the tools offered (default: every tool of the agent)")
    skill_timeout_s: float = Field(10.0, gt=0, description="seconds a skill script may run")
    env_template_mode: bool = Field(True, description="ask_env instructions may use the env's prompt templates")
    memory: MemoryConfig = Field(default_factory=MemoryConfig, description="thread memory: window, compaction, ceiling")
