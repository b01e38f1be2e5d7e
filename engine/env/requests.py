"""The messages that cross the actor boundary: small, picklable, batched."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["EnvReply", "EnvRequest"]


@dataclass(frozen=True)
class EnvRequest:
    """One agent's request to the environment."""

    op: Literal["ask", "observe", "call_tool", "discard"]  #: discard: drop what the agent queued this tick
    agent_id: int
    instruction: str = ""  #: the instruction (ask) or the tool name (call_tool)
    readonly: bool = False
    trace_id: str | None = None
    parent_span_id: str | None = None
    arguments: dict[str, Any] | None = None  #: call_tool only
    template_mode: bool = False  #: ask only: ``instruction`` is a template filled from ``variables``
    variables: dict[str, Any] | None = None  #: ask only: the template's values


@dataclass(frozen=True)
class EnvReply:
    """The environment's answer to one :class:`EnvRequest`."""

    answer: str
    status: str  #: success | in_progress | fail | error | unknown
    tools: tuple[str, ...] = ()  #: tools the router called
    value: Any = None  #: call_tool only: the tool's return value
