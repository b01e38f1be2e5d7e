"""The router's structured decision: one tool call (or a final answer) per turn, as JSON schema."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from engine.env.requests import EnvStatus
from engine.env.tool import ToolInfo
from engine.llm.decision import build_decision_model

__all__ = ["FINAL_ANSWER", "FinalAnswerArgs", "build_router_decision", "caller_fields"]

FINAL_ANSWER = "final_answer"
#: Arguments the router fills from the caller's context instead of asking the LLM.
caller_fields = frozenset({"agent_id"})


class FinalAnswerArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    answer: str = Field(description="what to tell the agent")
    status: EnvStatus


def _llm_args_model(info: ToolInfo) -> type[BaseModel]:
    fields: dict[str, Any] = {
        name: (field.annotation, field)
        for name, field in info.args_model.model_fields.items()
        if name not in caller_fields
    }
    return create_model(f"{info.name}_arguments", __config__=ConfigDict(extra="forbid"), **fields)


def build_router_decision(tools: dict[str, ToolInfo]) -> type[BaseModel]:
    """A decision model whose ``action`` is one of ``tools`` or ``final_answer``.

    Args:
        tools: routable tools by the name the LLM must use.
    """
    actions = {name: _llm_args_model(info) for name, info in tools.items()}
    actions[FINAL_ANSWER] = FinalAnswerArgs
    return build_decision_model(
        "RouterDecision", actions, stop_field="done", stop_help="true when no further call is needed after this one"
    )
