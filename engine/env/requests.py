"""The messages that cross the actor boundary: small, picklable, batched."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = ["EnvReply", "EnvRequest"]


@dataclass(frozen=True)
class EnvRequest:
    """One agent's request to the environment."""

    op: Literal["ask", "observe"]
    agent_id: int
    instruction: str = ""
    readonly: bool = False
    trace_id: str | None = None
    parent_span_id: str | None = None


@dataclass(frozen=True)
class EnvReply:
    """The environment's answer to one :class:`EnvRequest`."""

    answer: str
    status: str  #: success | in_progress | fail | error | unknown
    tools: tuple[str, ...] = ()  #: tools the router called
