"""The ask/intervene helper's tools: look agents up, ask them, ask or change the env, message agents.

Each tool has a typed arguments model (its JSON schema goes into the plan schema) and a
``mutating`` flag; :meth:`HelperToolbox.tools` offers only non-mutating tools for an ``ask``, and
:meth:`HelperToolbox.call` refuses any tool the kind was not offered, whatever a plan names.
Filtering works on the agent specs (no agent is rebuilt); asking agents goes through the society.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.env.base import EXPERIMENTER_ID
from engine.env.handle import EnvHandle
from engine.env.requests import EnvRequest
from engine.errors import ToolCallError
from engine.society.experimenter.profile_filter import lookup_field, match_profile

__all__ = [
    "SYSTEM_MESSAGE_TOOL",
    "AgentIdArgs",
    "AgentsQuestionArgs",
    "EnvAskArgs",
    "EnvToolArgs",
    "FilterArgs",
    "HelperKind",
    "HelperTool",
    "HelperToolbox",
    "ListAgentsArgs",
    "MessageArgs",
    "NoArgs",
    "SocietyView",
]

HelperKind = Literal["ask", "intervene"]
#: the MessagingSpace tool that delivers a message from the experimenter
SYSTEM_MESSAGE_TOOL = "send_system_message"
_FAILED_STATUSES = ("fail", "error")
Scalar = str | int | float | bool


class SocietyView(Protocol):
    """What the helper needs from the society (AgentSociety provides it)."""

    @property
    def current_time(self) -> datetime: ...

    @property
    def agent_ids(self) -> list[int]: ...

    @property
    def agent_specs(self) -> list[dict[str, Any]]:
        """``{"id", "type", "profile", "config"}`` per agent."""
        ...

    async def ask_agents(self, agent_ids: list[int], question: str) -> dict[int, str]:
        """Each agent's answer to ``question`` (agents rebuilt read-only from their workspaces)."""
        ...


# ---- argument models ------------------------------------------------------------------------------
_FORBID = ConfigDict(extra="forbid")


class NoArgs(BaseModel):
    model_config = _FORBID


class ListAgentsArgs(BaseModel):
    model_config = _FORBID
    offset: int = Field(0, ge=0, description="index of the first agent of the page")
    limit: int = Field(20, ge=1, le=100, description="agents per page")


class AgentIdArgs(BaseModel):
    model_config = _FORBID
    agent_id: int


class FilterArgs(BaseModel):
    model_config = _FORBID
    field: str = Field(description="a profile field, dotted for nested ones (e.g. age, address.city)")
    op: Literal["==", "!=", "<", "<=", ">", ">=", "contains", "in"]
    value: Scalar | list[Scalar] = Field(description="what to compare with (a list for op 'in')")


class EnvAskArgs(BaseModel):
    model_config = _FORBID
    instruction: str = Field(description="a plain-language instruction for the environment")
    as_agent_id: int | None = Field(None, description="run it as this agent (default: as the experimenter)")


class AgentsQuestionArgs(BaseModel):
    model_config = _FORBID
    agent_ids: list[int] = Field(default_factory=list, description="the agents (or use from_step)")
    from_step: int | None = Field(None, description="use the agent_ids produced by this earlier step")
    question: str


class EnvToolArgs(BaseModel):
    model_config = _FORBID
    name: str = Field(description="the environment tool's name")
    arguments: dict[str, Any] = Field(description="its arguments, agent_id included where it takes one")


class MessageArgs(BaseModel):
    model_config = _FORBID
    agent_ids: list[int] = Field(default_factory=list, description="the recipients (or use from_step)")
    from_step: int | None = Field(None, description="use the agent_ids produced by this earlier step")
    content: str


@dataclass(frozen=True)
class HelperTool:
    """One tool of the helper."""

    name: str
    description: str
    args_model: type[BaseModel]
    mutating: bool
    run: Callable[[Any, Sequence[Any]], Awaitable[Any]]  #: (validated args, earlier step results) -> JSON-able result

    def signature_line(self) -> str:
        """``name(arg: type, opt: integer|null = null)``, as the plan prompt lists it."""
        props = self.args_model.model_json_schema().get("properties", {})
        params = [f"{name}: {_type_name(spec)}" + (f" = {json.dumps(spec['default'])}" if "default" in spec else "")
                  for name, spec in props.items()]
        return f"{self.name}({', '.join(params)})"


def _type_name(spec: dict[str, Any]) -> str:
    if "enum" in spec:
        return "|".join(json.dumps(v) for v in spec["enum"])
    if "anyOf" in spec:
        return "|".join(_type_name(option) for option in spec["anyOf"])
    if spec.get("type") == "array":
        return f"array[{_type_name(spec.get('items', {}))}]"
    return str(spec.get("type", "any"))


def _jsonable(value: Any) -> Any:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return str(value)
    return value


class HelperToolbox:
    """The tools, bound to one env router and one society.

    Args:
        env_router: RouterBase or EnvRouterProxy.
        society: the society view.
        max_ask_agents: most agents one ask_agents step may question (each is a full agent run).
        max_message_agents: most recipients of one message_agents step.
    """

    def __init__(self, env_router: EnvHandle, society: SocietyView, *, max_ask_agents: int = 20,
                 max_message_agents: int = 1000) -> None:
        self.env = env_router
        self.society = society
        self.max_ask_agents = max_ask_agents
        self.max_message_agents = max_message_agents
        self._all = {t.name: t for t in [
            HelperTool("current_time", "the current simulated time", NoArgs, False, self._current_time),
            HelperTool("list_agents", "a page of agents (ids and names)", ListAgentsArgs, False, self._list_agents),
            HelperTool("get_profile", "one agent's type and profile", AgentIdArgs, False, self._get_profile),
            HelperTool("filter_agents", "ids of agents whose profile field compares true with a value (no agent is run)",
                       FilterArgs, False, self._filter_agents),
            HelperTool("ask_env", "observe the environment with a plain-language instruction (read-only)",
                       EnvAskArgs, False, self._ask_env),
            HelperTool("ask_agents", f"ask up to {max_ask_agents} agents a question; each answers in character",
                       AgentsQuestionArgs, False, self._ask_agents),
            HelperTool("change_env", "change the environment with a plain-language instruction", EnvAskArgs, True,
                       self._change_env),
            HelperTool("call_env_tool", "call one environment tool directly by name", EnvToolArgs, True,
                       self._call_env_tool),
            HelperTool("message_agents", "send agents a message from the experimenter; they read it next tick",
                       MessageArgs, True, self._message_agents),
        ]}

    def tools(self, kind: HelperKind) -> dict[str, HelperTool]:
        """The tools offered for ``kind``: an ask never gets a mutating tool."""
        return {name: t for name, t in self._all.items() if kind == "intervene" or not t.mutating}

    async def call(self, kind: HelperKind, name: str, args: dict[str, Any], earlier: Sequence[Any]) -> Any:
        """Run tool ``name`` for ``kind`` with ``args``; ``earlier[i]`` is step i+1's result (None if it failed).

        Raises:
            ToolCallError: a tool not offered for ``kind``, bad arguments, or a refused call.
            PolisError: whatever the env or the agents raised.
        """
        tool = self.tools(kind).get(name)
        if tool is None:
            why = "changes the simulation and this is a read-only ask" if name in self._all else "does not exist"
            raise ToolCallError(f"tool {name!r} {why}; offered: {', '.join(self.tools(kind))}")
        try:
            parsed = tool.args_model.model_validate(args)
        except ValidationError as error:
            first = error.errors()[0]
            raise ToolCallError(f"bad arguments for {name}: {first['msg']} at {'.'.join(map(str, first['loc']))}") from None
        return await tool.run(parsed, earlier)

    # ---- lookups ------------------------------------------------------------------------------
    def _specs(self) -> dict[int, dict[str, Any]]:
        return {int(s["id"]): s for s in self.society.agent_specs}

    def _agent_ids(self, args: Any, earlier: Sequence[Any], limit: int) -> list[int]:
        if args.from_step is not None and args.agent_ids:
            raise ToolCallError("give agent_ids or from_step, not both")
        if args.from_step is not None:
            if not 1 <= args.from_step <= len(earlier):
                raise ToolCallError(f"from_step={args.from_step} is not an earlier step (steps so far: {len(earlier)})")
            found = earlier[args.from_step - 1]
            if not isinstance(found, dict) or "agent_ids" not in found:
                raise ToolCallError(f"step {args.from_step} produced no agent_ids")
            ids = [int(i) for i in found["agent_ids"]]
        else:
            ids = list(dict.fromkeys(args.agent_ids))
        if not ids:
            raise ToolCallError("no agents given")
        unknown = sorted(set(ids) - set(self.society.agent_ids))
        if unknown:
            raise ToolCallError(f"no such agents: {unknown[:20]}")
        if len(ids) > limit:
            raise ToolCallError(f"{len(ids)} agents given; at most {limit} per step")
        return ids

    async def _current_time(self, args: NoArgs, earlier: Sequence[Any]) -> str:
        return self.society.current_time.isoformat()

    async def _list_agents(self, args: ListAgentsArgs, earlier: Sequence[Any]) -> dict[str, Any]:
        specs = sorted(self.society.agent_specs, key=lambda s: int(s["id"]))
        page = specs[args.offset : args.offset + args.limit]
        agents = [{"id": int(s["id"]), "name": s.get("profile", {}).get("name")} for s in page]
        return {"total": len(specs), "offset": args.offset, "agents": agents, "agent_ids": [a["id"] for a in agents]}

    async def _get_profile(self, args: AgentIdArgs, earlier: Sequence[Any]) -> dict[str, Any]:
        spec = self._specs().get(args.agent_id)
        if spec is None:
            raise ToolCallError(f"there is no agent {args.agent_id}")
        return {"id": args.agent_id, "type": spec.get("type"), "profile": _jsonable(spec.get("profile", {}))}

    async def _filter_agents(self, args: FilterArgs, earlier: Sequence[Any]) -> dict[str, Any]:
        if args.op == "in" and not isinstance(args.value, list):
            raise ToolCallError("op 'in' needs a list value")
        seen, ids = False, []
        for agent_id, spec in sorted(self._specs().items()):
            present, actual = lookup_field(spec.get("profile", {}), args.field)
            seen = seen or present
            if present and match_profile(actual, args.op, args.value):
                ids.append(agent_id)
        if not seen:
            fields = sorted({k for s in self.society.agent_specs for k in s.get("profile", {})})
            raise ToolCallError(f"no agent has profile field {args.field!r}; fields: {', '.join(fields[:30])}")
        return {"field": args.field, "op": args.op, "value": args.value, "count": len(ids), "agent_ids": ids}

    # ---- asking -------------------------------------------------------------------------------
    async def _env_ask(self, args: EnvAskArgs, *, readonly: bool) -> dict[str, Any]:
        caller = EXPERIMENTER_ID if args.as_agent_id is None else args.as_agent_id
        if caller != EXPERIMENTER_ID and caller not in set(self.society.agent_ids):
            raise ToolCallError(f"there is no agent {caller}")
        reply = await self.env.ask(EnvRequest("ask", caller, args.instruction, readonly))
        if reply.status in _FAILED_STATUSES:
            raise ToolCallError(f"the environment answered with status {reply.status}: {reply.answer}")
        return {"status": reply.status, "answer": reply.answer}

    async def _ask_env(self, args: EnvAskArgs, earlier: Sequence[Any]) -> dict[str, Any]:
        return await self._env_ask(args, readonly=True)

    async def _ask_agents(self, args: AgentsQuestionArgs, earlier: Sequence[Any]) -> dict[str, Any]:
        ids = self._agent_ids(args, earlier, self.max_ask_agents)
        answers = await self.society.ask_agents(ids, args.question)
        return {"answers": [{"agent_id": i, "answer": answers[i]} for i in ids if i in answers], "agent_ids": ids}

    # ---- changing -----------------------------------------------------------------------------
    async def _change_env(self, args: EnvAskArgs, earlier: Sequence[Any]) -> dict[str, Any]:
        return await self._env_ask(args, readonly=False)

    async def _call_env_tool(self, args: EnvToolArgs, earlier: Sequence[Any]) -> dict[str, Any]:
        value = await self.env.call_tool(args.name, dict(args.arguments), readonly=False)
        return {"tool": args.name, "result": _jsonable(value)}

    async def _message_agents(self, args: MessageArgs, earlier: Sequence[Any]) -> dict[str, Any]:
        ids = self._agent_ids(args, earlier, self.max_message_agents)

        async def send(agent_id: int) -> str | None:
            try:
                await self.env.call_tool(
                    SYSTEM_MESSAGE_TOOL, {"agent_id": EXPERIMENTER_ID, "to_agent_id": agent_id, "content": args.content}
                )
            except ToolCallError as error:
                return str(error)
            return None

        errors = await asyncio.gather(*(send(i) for i in ids))
        failed = {i: e for i, e in zip(ids, errors, strict=True) if e is not None}
        sent = [i for i in ids if i not in failed]
        if failed:
            raise ToolCallError(f"queued for agents {sent} (do not resend); failed for {failed}")
        return {"queued": len(sent), "agent_ids": sent, "delivery": "at the next env step or settle"}
