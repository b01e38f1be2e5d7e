"""Structured decisions: "call one of these tools with these arguments", as a pydantic model.

Decisions are JSON-schema based rather than native tool calls because small local models only
follow grammars. The action is a discriminated union on ``tool`` (one branch per tool), so the
schema pins each tool's arguments.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

__all__ = ["build_decision_model"]


@lru_cache(maxsize=256)
def _cached(name: str, actions: tuple[tuple[str, type[BaseModel]], ...], stop_field: str, stop_help: str) -> type[BaseModel]:
    # Field definitions built at run time (a Literal per tool, a Union of the branches) are values
    # to the type checker, not types: they travel in dict[str, Any] to create_model.
    branches = []
    for tool, args in actions:
        branch_fields: dict[str, Any] = {"tool": (Literal[tool], ...), "arguments": (args, ...)}
        branches.append(create_model(f"{name}_{tool}", __config__=ConfigDict(extra="forbid"), **branch_fields))
    action_type = Annotated[Union[tuple(branches)], Field(discriminator="tool")]  # type: ignore[valid-type]  # a Union built at run time  # noqa: UP007
    fields: dict[str, Any] = {
        "thought": (str, Field(description="brief reasoning")),
        "action": (action_type, ...),
        stop_field: (bool, Field(description=stop_help)),
    }
    return create_model(name, __config__=ConfigDict(extra="forbid"), **fields)


def build_decision_model(
    name: str, actions: dict[str, type[BaseModel]], *, stop_field: str, stop_help: str
) -> type[BaseModel]:
    """A model ``{thought, action: {tool, arguments}, <stop_field>: bool}`` (cached per tool set).

    Args:
        name: the model's name (shown to the LLM as the schema name).
        actions: tool name -> arguments model, in the order offered.
        stop_field: the boolean that ends the loop after this action.
        stop_help: its description.
    """
    return _cached(name, tuple(actions.items()), stop_field, stop_help)
