"""The base agent tools offered in the ReAct loop, and their argument models."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer

from engine.agent.memory.episodes import FinishWithMemories

__all__ = ["ASK_ENV", "ASK_ENV_EXAMPLES", "FINISH", "AgentTool", "AskEnvArgs", "FinishArgs"]

#: Example instructions shown in the ask_env schema. Their values are written out (quoted text,
#: agent ids) as models tend to write them; the runtime turns them into placeholders, so the
#: simulated LLM, which picks among these, sends a few templates with many different values.
ASK_ENV_EXAMPLES: tuple[str, ...] = (
    "read my inbox",
    "list the groups and which ones I belong to",
    "send a message to agent 2 saying 'hello, how are you?'",
    "send a message to agent 5 saying 'shall we meet at the market at noon?'",
    "send a message to agent 7 saying 'thanks for your help yesterday'",
    "post 'good morning, everyone' to group 'town square'",
    "join group 'book club'",
)


class AskEnvArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    instruction: str = Field(
        min_length=1, max_length=1000, examples=list(ASK_ENV_EXAMPLES),
        description="what to observe or do in the environment, in plain language; quote message text, "
        "or write {name} placeholders for values such as agent ids, text and amounts",
    )
    variables: dict[str, str | int | float | bool] | None = Field(
        default=None,
        description='the values of the {name} placeholders in instruction, e.g. {"agent": 4, "text": "see you at noon"}',
    )

    @model_serializer(mode="wrap")
    def _omit_no_variables(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # Logs and the thread show what the model wrote: no "variables": null when it gave none.
        data: dict[str, Any] = handler(self)
        if data.get("variables") is None:
            data.pop("variables", None)
        return data


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


ASK_ENV = AgentTool(
    "ask_env",
    "Observe or act in the environment (messages, groups, ...); put values specific to you or this moment "
    "(agent ids, message text, amounts) in quotes or in {placeholders} given in variables",
    AskEnvArgs,
    readonly=True,
)
FINISH = AgentTool("finish", "End this step with a summary and, optionally, memories worth keeping", FinishWithMemories, readonly=True)
