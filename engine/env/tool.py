"""The ``@tool`` decorator and the description of one environment tool.

Contract (checked when the module class is defined):
- ``kind="observe"`` tools are read-only and take exactly one argument, ``agent_id``;
- ``kind="statistics"`` tools are read-only and take no argument;
- other tools take any JSON-describable arguments;
- ``experimenter=True`` tools are never offered to agents by a router; only ``call_tool`` reaches them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, create_model

from engine.errors import ToolDefinitionError

__all__ = ["ToolInfo", "build_tool_info", "tool"]

F = TypeVar("F", bound=Callable[..., Any])
ToolKind = Literal["observe", "statistics"]


@dataclass(frozen=True)
class ToolInfo:
    """What a router knows about one tool."""

    name: str
    module: str  #: the module class name
    readonly: bool
    kind: ToolKind | None
    description: str
    args_model: type[BaseModel]  #: validates arguments; its JSON schema is shown to the LLM
    is_async: bool
    experimenter: bool = False  #: hidden from routing (the ask/intervene helper calls it directly)

    def signature_line(self) -> str:
        """A pyi-like one-liner: ``send_message(agent_id: int, to_agent_id: int, content: str)``."""
        props = self.args_model.model_json_schema().get("properties", {})
        params = ", ".join(f"{name}: {spec.get('type', 'any')}" for name, spec in props.items())
        return f"{self.name}({params})"


def tool(readonly: bool = False, kind: ToolKind | None = None, *, experimenter: bool = False) -> Callable[[F], F]:
    """Mark an EnvBase method as a tool.

    Args:
        readonly: True when the tool never changes environment state.
        kind: ``"observe"`` (single ``agent_id`` argument, run automatically for observations),
            ``"statistics"`` (no arguments, aggregate queries) or None.
        experimenter: for the experimenter only: routers never offer it to agents.
    """
    if kind is not None and kind not in ("observe", "statistics"):
        raise ToolDefinitionError(f"@tool kind must be 'observe', 'statistics' or None, not {kind!r}")

    def mark(fn: F) -> F:
        fn.__polis_tool__ = {"readonly": readonly, "kind": kind, "experimenter": experimenter}  # type: ignore[attr-defined]  # the mark lives on the function object
        return fn

    return mark


def build_tool_info(owner: str, fn: Callable[..., Any]) -> ToolInfo:
    """Inspect a decorated method and check the tool contract.

    Raises:
        ToolDefinitionError: the signature breaks the contract for its kind.
    """
    marks = fn.__polis_tool__  # type: ignore[attr-defined]  # the mark set by @tool
    params = [p for p in inspect.signature(fn, eval_str=True).parameters.values() if p.name != "self"]
    where = f"{owner}.{fn.__name__}"
    kind, readonly = marks["kind"], marks["readonly"]
    if kind in ("observe", "statistics") and not readonly:
        raise ToolDefinitionError(f"{where}: kind={kind!r} tools must be readonly=True")
    if kind == "observe" and [p.name for p in params] != ["agent_id"]:
        raise ToolDefinitionError(f"{where}: an observe tool takes exactly one argument, agent_id")
    if kind == "statistics" and params:
        raise ToolDefinitionError(f"{where}: a statistics tool takes no arguments")
    fields: dict[str, Any] = {}
    for p in params:
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise ToolDefinitionError(f"{where}: *args/**kwargs cannot be described to an LLM")
        if p.annotation is inspect.Parameter.empty:
            raise ToolDefinitionError(f"{where}: parameter {p.name!r} needs a type annotation")
        fields[p.name] = (p.annotation, ... if p.default is inspect.Parameter.empty else p.default)
    args_model = create_model(
        f"{owner}_{fn.__name__}_args", __config__=ConfigDict(extra="forbid"), **fields
    )
    doc = inspect.getdoc(fn) or fn.__name__
    return ToolInfo(
        name=fn.__name__,
        module=owner,
        readonly=readonly,
        kind=kind,
        description=doc.splitlines()[0],
        args_model=args_model,
        is_async=inspect.iscoroutinefunction(fn),
        experimenter=bool(marks.get("experimenter", False)),
    )
