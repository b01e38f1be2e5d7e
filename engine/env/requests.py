"""The messages an :class:`~engine.env.handle.EnvHandle` takes and gives: small, picklable, batched.

The same two types serve an in-process router and the env actor, so nothing converts between a
request and a context dict on either side of the actor boundary.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

__all__ = ["ENV_STATUSES", "EnvReply", "EnvRequest", "EnvStatus", "ToolCall"]

#: How an ask ended (see ``engine.env.router_base.STATUS_DESCRIPTIONS`` for their meaning).
EnvStatus = Literal["success", "in_progress", "fail", "error", "unknown"]
ENV_STATUSES: tuple[EnvStatus, ...] = get_args(EnvStatus)


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
class ToolCall:
    """One tool call made while serving a request."""

    tool: str  #: the router's name of the tool
    arguments: dict[str, Any]  #: as the tool received them (caller fields such as ``agent_id`` filled in)
    result: str  #: the tool's result as text, or ``"error: ..."`` when it refused
    ok: bool

    @classmethod
    def from_row(cls, row: Mapping[str, Any]) -> ToolCall:
        """A call from a ``{tool, arguments, result, ok}`` row (the sandbox broker records those)."""
        return cls(str(row["tool"]), dict(row["arguments"]), str(row["result"]), bool(row["ok"]))


@dataclass(frozen=True)
class EnvReply:
    """The environment's answer to one :class:`EnvRequest`."""

    answer: str
    status: EnvStatus
    calls: tuple[ToolCall, ...] = ()  #: the tool calls made, in order
    value: Any = None  #: call_tool and discard only: the tool's return value, the updates dropped
    module: str | None = None  #: two-tier routers: the module tier 1 chose
    code_results: dict[str, Any] | None = None  #: codegen router: the ``results`` dict the code filled

    @property
    def tools(self) -> tuple[str, ...]:
        """The names of the tools called, in order."""
        return tuple(call.tool for call in self.calls)
