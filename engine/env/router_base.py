"""RouterBase: maps agents' natural-language requests onto environment modules' tools."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from engine.env.base import EnvBase
from engine.env.requests import EnvReply, EnvRequest, EnvStatus
from engine.env.tool import ToolInfo
from engine.env.world import listing_description
from engine.errors import ToolCallError
from engine.llm.meter import Meter
from engine.llm.protocol import ChatModel

__all__ = ["STATUS_DESCRIPTIONS", "RouterBase", "RouterConfig", "RouterSetup"]

STATUS_DESCRIPTIONS: dict[EnvStatus, str] = {
    "success": "The task has been completed successfully.",
    "in_progress": "More steps are needed; check again in a later step.",
    "fail": "The task could not be completed (unsupported instruction, missing data, invalid input).",
    "error": "An error occurred while executing tools.",
    "unknown": "Execution status unknown.",
}


class RouterConfig(BaseModel):
    """What a spec's ``environment.router_config`` may set for a router; a router that reads more declares a
    subclass as its ``Config`` (``max_router_steps`` is every router's, beside it)."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass(frozen=True)
class RouterSetup:
    """What every router is built with besides its ``Config``: the spec's other environment settings and the run's."""

    meter: Meter
    max_steps: int = 3  #: the spec's ``max_router_steps``
    cache_dir: Path | None = None  #: where a router that caches keeps its cache across runs
    seed: int = 0  #: the run's
    embedder: str = "sim"  #: the spec's ``environment.embedder``, for a router that embeds
    embedder_config: Mapping[str, Any] = field(default_factory=dict)


class RouterBase(ABC):
    """Coordinates agents and environment modules; an :class:`~engine.env.handle.EnvHandle` in this process.

    Args:
        env_modules: the modules, in spec order.
        llm: the model used to route (role ``coder``), already metered.
        meter: where the router's LLM usage accumulates.
        max_steps: tool calls one ask may make (interpreted by subclasses).
    """

    Config: ClassVar[type[RouterConfig]] = RouterConfig

    @classmethod
    def from_config(cls, env_modules: list[EnvBase], llm: ChatModel | None, config: RouterConfig, setup: RouterSetup) -> RouterBase:
        """The router a spec describes: ``config`` is its ``router_config`` (validated), ``setup`` the rest."""
        return cls(env_modules, llm, meter=setup.meter, max_steps=setup.max_steps, **dict(config))

    def __init__(self, env_modules: list[EnvBase], llm: ChatModel | None = None, *, meter: Meter | None = None, max_steps: int = 3) -> None:
        self.env_modules = env_modules
        self.llm = llm
        self.meter = meter or Meter()
        self.max_steps = max_steps
        self.t: datetime | None = None
        self._tools: dict[str, tuple[EnvBase, ToolInfo]] = {}
        for module in env_modules:
            for name, info in module.tools().items():
                key = name if name not in self._tools else f"{module.name}_{name}"
                self._tools[key] = (module, info)
        # Only tool *execution* is serialised for modules that are not concurrency-safe; LLM
        # routing never holds a lock.
        self._locks = {id(m): asyncio.Lock() for m in env_modules if not m.is_concurrency_safe()}
        self._world_description: str | None = None

    # ---- tools -------------------------------------------------------------------------------
    def tools(self, *, readonly: bool = False) -> dict[str, ToolInfo]:
        """Routable tools by name (observe/statistics kinds included), read-only ones if asked.

        Experimenter tools are not routable: only :meth:`call_tool` reaches them.
        """
        return {
            name: info for name, (_, info) in self._tools.items()
            if (info.readonly or not readonly) and not info.experimenter
        }

    async def call_tool(self, name: str, arguments: dict[str, Any], *, readonly: bool = False) -> Any:
        """Run one tool, serialising execution for modules that are not concurrency-safe.

        Raises:
            ToolCallError: unknown name, readonly violation, bad arguments or a failing tool.
        """
        entry = self._tools.get(name)
        if entry is None:
            raise ToolCallError(f"unknown tool {name!r}")
        module, info = entry
        lock = self._locks.get(id(module))
        if lock is None:
            return await module.call_tool(info.name, arguments, readonly=readonly)
        async with lock:
            return await module.call_tool(info.name, arguments, readonly=readonly)

    async def observe(self, agent_id: int) -> str:
        """Run every ``observe`` tool for ``agent_id`` (no LLM involved)."""
        parts = []
        for name, (_, info) in self._tools.items():
            if info.kind == "observe":
                parts.append(str(await self.call_tool(name, {"agent_id": agent_id}, readonly=True)))
        return "\n".join(parts)

    # ---- lifecycle ---------------------------------------------------------------------------
    def set_current_time(self, t: datetime) -> None:
        self.t = t
        for module in self.env_modules:
            module.set_current_time(t)

    async def discard_pending(self, agent_id: int) -> int:
        """Drop what ``agent_id`` queued this tick in every module (its step is being re-run)."""
        return sum(module.discard_pending(agent_id) for module in self.env_modules)

    async def init(self, start_datetime: datetime, agent_ids: list[int] | None = None, snapshot: Path | None = None) -> bool:
        """Initialise modules, then restore their state (from ``snapshot`` when given, else from the
        bound workspaces); True when any state was restored."""
        self.t = start_datetime
        for module in self.env_modules:
            await module.init(start_datetime)
            if agent_ids is not None:
                module.bind_agents(agent_ids)
        return await self.from_workspaces(snapshot)

    async def step(self, tick: int, t: datetime) -> None:
        for module in self.env_modules:
            await module.step(tick, t)
        self.t = t

    def apply_pending(self) -> int:
        """Apply every module's queued updates now (between ticks); returns how many were applied."""
        return sum(module.apply_pending() for module in self.env_modules)

    async def close(self) -> None:
        for module in self.env_modules:
            await module.close()

    def bind_env_workspaces(self, root: Path, module_types: list[str]) -> None:
        """Bind module i to ``root/module_types[i]`` (index-suffixed when a type repeats)."""
        seen: dict[str, int] = {}
        self._workspace_names = []
        for module, type_name in zip(self.env_modules, module_types, strict=True):
            n = seen.get(type_name, 0)
            seen[type_name] = n + 1
            self._workspace_names.append(type_name if n == 0 else f"{type_name}_{n}")
            module.bind_workspace(root / self._workspace_names[-1])

    def _roots(self, root: Path | None) -> list[Path | None]:
        if root is None:
            return [None] * len(self.env_modules)
        names = getattr(self, "_workspace_names", None) or [m.name for m in self.env_modules]
        return [root / name for name in names]

    async def to_workspaces(self, root: Path | None = None) -> None:
        """Write every module's state to its bound workspace, or under ``root`` (a snapshot) when given."""
        await asyncio.gather(*(m.to_workspace(r) for m, r in zip(self.env_modules, self._roots(root), strict=True)))

    async def from_workspaces(self, root: Path | None = None) -> bool:
        """Restore every module from its bound workspace or from the snapshot ``root``."""
        restored = await asyncio.gather(*(m.restore(r) for m, r in zip(self.env_modules, self._roots(root), strict=True)))
        return any(restored)

    def get_tool_call_history(self) -> list[dict[str, Any]]:
        history = [r for m in self.env_modules for r in m.get_tool_call_history()]
        return sorted(history, key=lambda r: r["timestamp"])

    def reset_tool_call_history(self) -> None:
        for module in self.env_modules:
            module.reset_tool_call_history()

    def drain_tool_calls(self) -> list[dict[str, Any]]:
        """Every module's tool calls since the last drain, oldest first; the modules forget them."""
        return sorted((r for m in self.env_modules for r in m.drain_tool_calls()), key=lambda r: r["timestamp"])

    def discard_tool_calls(self, agent_id: int) -> int:
        """Forget the tool calls recorded for ``agent_id`` since the last drain; returns how many."""
        return sum(module.discard_tool_calls(agent_id) for module in self.env_modules)

    def set_trace_context(self, trace_id: str | None) -> None:
        for module in self.env_modules:
            module.set_trace_context(trace_id)

    # ---- descriptions ------------------------------------------------------------------------
    def tool_listing(self, *, readonly: bool = False) -> str:
        return "\n".join(f"- {info.signature_line()}: {info.description}" for info in self.tools(readonly=readonly).values())

    def get_world_description(self) -> str:
        """A short description of the world: the one set by :meth:`set_world_description` (the env
        actor's, written once per run by the LLM), else the deterministic one from the tool listing."""
        if self._world_description is None:
            self._world_description = listing_description(self.env_modules)
        return self._world_description

    def set_world_description(self, text: str) -> None:
        """Use ``text`` as the world description in routing prompts from now on."""
        self._world_description = text

    @staticmethod
    def get_status_descriptions() -> dict[EnvStatus, str]:
        return dict(STATUS_DESCRIPTIONS)

    def get_token_usages(self) -> dict[str, int]:
        return {"calls": self.meter.calls, "input_tokens": self.meter.input_tokens, "output_tokens": self.meter.output_tokens}

    @abstractmethod
    async def ask(self, request: EnvRequest) -> EnvReply:
        """Route one instruction (``request.op == "ask"``) onto the tools.

        ``request.agent_id`` fills the tools' ``agent_id``; with ``request.template_mode`` the
        instruction is a template whose values are ``request.variables``; ``request.readonly``
        offers read-only tools only. A failure to route is a reply with status ``fail`` or ``error``.
        """
