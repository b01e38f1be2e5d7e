"""Structured decisions: "call one of these tools with these arguments", as a pydantic model.

Decisions are JSON-schema based rather than native tool calls because small local models only
follow grammars. The action is a discriminated union on ``tool`` (one branch per tool), so the
schema pins each tool's arguments.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Annotated, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

__all__ = ["build_decision_model"]


@lru_cache(maxsize=256)
def _cached(name: str, actions: tuple[tuple[str, type[BaseModel]], ...], stop_field: str, stop_help: str) -> type[BaseModel]:
    branches = [
        create_model(
            f"{name}_{tool}",
            __config__=ConfigDict(extra="forbid"),
            tool=(Literal[tool], ...),  # type: ignore[valid-type]
            arguments=(args, ...),
        )
        for tool, args in actions
    ]
    action_type = Annotated[Union[tuple(branches)], Field(discriminator="tool")]  # type: ignore[valid-type]  # noqa: UP007 - built at run time
    return create_model(
        name,
        __config__=ConfigDict(extra="forbid"),
        thought=(str, Field(description="brief reasoning")),
        action=(action_type, ...),
        **{stop_field: (bool, Field(description=stop_help))},  # type: ignore[arg-type]
    )


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
