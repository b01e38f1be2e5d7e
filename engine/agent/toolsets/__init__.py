"""Toolsets an agent can offer in its ReAct loop, one module per concept.

Each is a :class:`~engine.agent.toolset.Toolset` built over the agent's workspace in
``AgentBase.build_toolsets``.
"""

from engine.agent.toolsets.files import FileTools
from engine.agent.toolsets.memory import MemoryTools
from engine.agent.toolsets.skills import SkillTools
from engine.agent.toolsets.todo import TodoTools

__all__ = ["FileTools", "MemoryTools", "SkillTools", "TodoTools"]
