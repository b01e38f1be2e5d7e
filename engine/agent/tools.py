"""The base agent tools offered in the ReAct loop, and their argument models."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field

from engine.agent.memory.episodes import FinishWithMemories

__all__ = ["ASK_ENV", "FINISH", "AgentTool", "AskEnvArgs", "FinishArgs"]


class AskEnvArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    instruction: str = Field(min_length=1, max_length=1000, description="what to observe or do in the environment, in plain language")


class FinishArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    summary: str = Field(description="what you did this step, in one or two sentences")


@dataclass(frozen=True)
class AgentTool:
    """A tool the agent's ReAct loop may call."""

    name: str
    description: str
    args_model: type[BaseModel]
    readonly: bool  #: offered in readonly asks


ASK_ENV = AgentTool("ask_env", "Observe or act in the environment (messages, groups, ...)", AskEnvArgs, readonly=True)
FINISH = AgentTool("finish", "End this step with a summary and, optionally, memories worth keeping", FinishWithMemories, readonly=True)
