"""An intervene step's env tool calls (``calls``), checked against the spec's env modules when the spec is read.

``{type: intervene, calls: [{tool: remove_top_nodes, arguments: {share: 0.01}}]}`` calls the tools as written, with
no LLM in between, so a network intervention is exact and repeatable. A tool no module of the spec has, or
arguments its tool refuses, is an error at the call's field path; ``agent_id`` is the experimenter's, filled in.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError

__all__ = ["EnvCallSpec", "check_env_calls", "describe_calls", "resolve_env_calls"]


class EnvCallSpec(BaseModel):
    """One env tool call of an intervene step."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    tool: str = Field(min_length=1, description="an env tool of the spec's modules (experimenter-only tools included)")
    arguments: dict[str, Any] = Field(default_factory=dict, description="its arguments; agent_id is the experimenter's")


def _tools(module_types: Sequence[str]) -> dict[str, Any]:
    from engine.env.registry import resolve_env_module

    return {name: info for kind in module_types for name, info in resolve_env_module(kind).tools().items()}


def _arguments(call: EnvCallSpec, info: Any) -> dict[str, Any]:
    """The call's arguments as sent: ``agent_id`` the experimenter's where the tool takes one."""
    from engine.env.base import EXPERIMENTER_ID

    takes_agent = "agent_id" in info.args_model.model_fields
    return {**call.arguments, "agent_id": EXPERIMENTER_ID} if takes_agent else dict(call.arguments)


def resolve_env_calls(calls: Sequence[EnvCallSpec], module_types: Sequence[str]) -> list[tuple[str, dict[str, Any]]]:
    """Checked calls (:func:`check_env_calls`) as (tool, arguments) to send, the experimenter's agent_id filled in."""
    tools = _tools(module_types)
    return [(call.tool, _arguments(call, tools[call.tool])) for call in calls]


def describe_calls(calls: Sequence[EnvCallSpec]) -> str:
    """The calls as one line of text (an intervene step's text, where it gives no instruction)."""
    return "; ".join(f"{c.tool}({', '.join(f'{k}={v!r}' for k, v in c.arguments.items())})" for c in calls)


def check_env_calls(steps: Sequence[Any], module_types: Sequence[str]) -> None:
    """Every intervene step's calls against the tools of ``module_types``.

    Raises:
        PydanticCustomError: the first call that cannot be, its field path as ``ctx.key``.
    """
    tools = _tools(module_types)
    for index, step in enumerate(steps):
        for number, call in enumerate(getattr(step, "calls", None) or ()):
            key = f"steps.{index}.calls.{number}"
            info = tools.get(call.tool)
            if info is None:
                near = difflib.get_close_matches(call.tool, sorted(tools), n=1)
                raise PydanticCustomError(
                    "env_call", "no env tool '{tool}' in the spec's modules{hint}",
                    {"key": f"{key}.tool", "tool": call.tool, "hint": f" (did you mean '{near[0]}'?)" if near else ""})
            if "agent_id" in call.arguments:
                raise PydanticCustomError("env_call", "agent_id is the experimenter's: leave it out",
                                          {"key": f"{key}.arguments.agent_id"})
            try:
                info.args_model.model_validate(_arguments(call, info))
            except ValidationError as error:
                first = error.errors()[0]
                where = ".".join(str(part) for part in first["loc"])
                raise PydanticCustomError("env_call", "{tool}: {message}",
                                          {"key": f"{key}.arguments.{where}", "tool": call.tool, "message": first["msg"]}) from None
