"""The agent runtime: workspace-bound stateless agents with a ReAct tool loop."""

from engine.agent.base import AgentBase
from engine.agent.outcome import StepOutcome
from engine.agent.person import PersonAgent
from engine.agent.registry import register_agent, resolve_agent
from engine.agent.service_proxy import ServiceProxy
from engine.agent.workspace import AgentWorkspace, workspace_path

__all__ = [
    "AgentBase",
    "AgentWorkspace",
    "PersonAgent",
    "ServiceProxy",
    "StepOutcome",
    "register_agent",
    "resolve_agent",
    "workspace_path",
]
