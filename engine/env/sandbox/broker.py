"""The tool broker: the one door from generated code to environment state.

It runs in the actor, whichever executor runs the code: a sandbox process or a thread only sends
``call(tool, arguments)`` and gets a reply back. The broker decides everything that protects the
environment: the tool must be one offered to this execution, a read-only execution reaches only
read-only tools, the caller-filled arguments (``agent_id``) cannot be passed, the arguments must
validate, at most ``max_tool_calls`` calls reach a tool. It records every call that reached a tool.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from engine.env.sandbox.limits import SandboxLimits
from engine.env.sandbox.runtime import ToolSpec
from engine.errors import ToolCallError

__all__ = ["SandboxTool", "ToolBroker", "plain"]


@dataclass(frozen=True)
class SandboxTool:
    """One tool as generated code sees it: ``name(*params)``."""

    name: str
    params: tuple[str, ...]  #: the arguments code passes, in positional order
    readonly: bool
    call: Callable[[dict[str, Any]], Awaitable[Any]]  #: runs the tool on the actor's loop
    bound: Mapping[str, Any] = field(default_factory=dict)  #: filled in by the caller (agent_id)
    #: checks the full arguments before the tool runs; raises TypeError (a mistake in the code)
    validate: Callable[[dict[str, Any]], None] | None = None

    def spec(self) -> ToolSpec:
        return (self.name, self.params, tuple(self.bound))


def plain(value: Any) -> Any:
    """Plain JSON data only: sandboxed code never receives an object with methods of ours."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return json.loads(json.dumps(value, default=str))


def _reply(kind: str, error: str) -> dict[str, Any]:
    return {"kind": kind, "error": error}


class ToolBroker:
    """Runs one execution's tool calls and records them.

    Args:
        tools: the tools offered to the execution (a read-only execution is offered only read-only ones).
        limits: the execution's limits (``max_tool_calls``).
        readonly: refuse every tool that changes state, whatever the code asks for.
    """

    def __init__(self, tools: Iterable[SandboxTool], limits: SandboxLimits, *, readonly: bool = False) -> None:
        self.readonly = readonly
        self.tools = {t.name: t for t in tools if t.readonly or not readonly}
        self.limits = limits
        self.calls: list[dict[str, Any]] = []  #: ``{tool, arguments, result, ok}`` per call that reached a tool
        self.mutations = 0  #: successful calls of tools that change state

    def specs(self) -> list[ToolSpec]:
        """The tools as the execution's namespace offers them."""
        return [tool.spec() for tool in self.tools.values()]

    async def call(self, name: Any, arguments: Any) -> dict[str, Any]:
        """Run one call the code made; the reply is ``{"kind": "ok", "value": ...}`` or
        ``{"kind": "type" | "tool" | "stop", "error": ...}`` (a mistake in the code, a refusal by
        the environment, or the end of the execution)."""
        tool = self.tools.get(name) if isinstance(name, str) else None
        if tool is None:
            # Code cannot name a tool it was not offered; only a subverted executor asks for one.
            return _reply("stop", f"tool {str(name)[:80]!r} is not available to this request")
        if self.readonly and not tool.readonly:
            return _reply("stop", f"{name} changes the environment and this request is read-only")
        if not isinstance(arguments, dict) or not all(isinstance(key, str) for key in arguments):
            return _reply("type", f"{name}(): arguments must be named plain values")
        for key in arguments:
            if key in tool.bound:
                return _reply("type", f"{name}(): {key} is filled in by the environment; do not pass it")
        if len(self.calls) >= self.limits.max_tool_calls:
            return _reply("stop", f"limit of {self.limits.max_tool_calls} tool calls per run exceeded")
        full = {**arguments, **tool.bound}
        if tool.validate is not None:
            try:
                tool.validate(full)
            except TypeError as error:
                return _reply("type", str(error))
        record: dict[str, Any] = {"tool": name, "arguments": full}
        try:
            result = await tool.call(full)
        except ToolCallError as error:
            self.calls.append({**record, "result": f"error: {error}", "ok": False})
            return _reply("tool", str(error))
        except Exception as error:  # a module bug: reported to the code and the router, never leaked as an object
            self.calls.append({**record, "result": f"error: {type(error).__name__}: {error}", "ok": False})
            return _reply("tool", f"{name} failed unexpectedly: {type(error).__name__}: {error}")
        value = plain(result)
        self.calls.append({**record, "result": value if isinstance(value, str) else json.dumps(value), "ok": True})
        if not tool.readonly:
            self.mutations += 1
        return {"kind": "ok", "value": value}
