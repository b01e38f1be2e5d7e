"""Two-tier routers: tier 1 picks one module (an enum decision), tier 2 routes within its tools.

For large tool sets: each LLM call sees either the short module list or one module's tools, never
every tool at once. Tier 2 is the ReAct loop or the plan executor, run over the module's tools.
"""

from __future__ import annotations

from abc import abstractmethod
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, create_model

from engine.env.base import EnvBase
from engine.env.prompts import REACT_SYSTEM
from engine.env.requests import EnvReply, EnvRequest
from engine.env.router_base import RouterBase
from engine.env.routers.decision import build_router_decision
from engine.env.routers.plan_execute import PlanExecuteRouter, PlanExecutor
from engine.env.routers.prompts import MODULE_INSTRUCTION, MODULE_SYSTEM
from engine.env.routers.react import (
    DecisionCache,
    LoopOutcome,
    react_loop,
    readonly_note,
    resolve_instruction,
    tool_lines,
    unreadable,
)
from engine.env.tool import ToolInfo
from engine.errors import LLMCallError, StructuredOutputError, ToolCallError
from engine.llm.meter import Meter
from engine.llm.protocol import ChatModel
from engine.llm.structured import complete_structured

__all__ = ["TwoTierPlanExecuteRouter", "TwoTierReActRouter", "TwoTierRouter", "build_module_choice"]


def build_module_choice(modules: list[str]) -> type[BaseModel]:
    """A model ``{thought, module}`` where ``module`` is one of ``modules``."""
    module_type: Any = Literal[tuple(modules)]  # built at run time from the module keys
    return create_model(
        "ModuleChoice",
        __config__=ConfigDict(extra="forbid"),
        thought=(str, Field(description="brief reasoning")),
        module=(module_type, Field(description="the module whose tools handle the instruction")),
    )


class TwoTierRouter(RouterBase):
    """Chooses a module, then hands the ask to :meth:`run_in_module` with that module's tools.

    A module with no tool offered to the ask (e.g. only mutating tools in a readonly ask) is not
    offered; when one module remains it is chosen without an LLM call.
    """

    def __init__(self, env_modules: list[EnvBase], llm: ChatModel | None = None, *, meter: Meter | None = None,
                 max_steps: int = 3) -> None:
        super().__init__(env_modules, llm, meter=meter, max_steps=max_steps)
        seen: dict[str, int] = {}
        self._module_keys: dict[int, str] = {}
        for module in env_modules:
            n = seen.get(module.name, 0)
            seen[module.name] = n + 1
            self._module_keys[id(module)] = module.name if n == 0 else f"{module.name}_{n}"
        self._descriptions = {self._module_keys[id(m)]: m.description() for m in env_modules}
        self._groups: dict[bool, dict[str, dict[str, ToolInfo]]] = {}
        self._choices: dict[bool, type[BaseModel]] = {}

    def module_tools(self, readonly: bool = False) -> dict[str, dict[str, ToolInfo]]:
        """The tools offered to an ask, grouped by module key (modules without any left out)."""
        if readonly not in self._groups:
            groups: dict[str, dict[str, ToolInfo]] = {key: {} for key in self._module_keys.values()}
            offered = self.tools(readonly=readonly)
            for name, (module, _) in self._tools.items():
                if name in offered:
                    groups[self._module_keys[id(module)]][name] = offered[name]
            self._groups[readonly] = {key: tools for key, tools in groups.items() if tools}
        return self._groups[readonly]

    async def choose_module(self, agent_id: Any, instruction: str, readonly: bool) -> str:
        """Tier 1: one structured call whose answer is a module key.

        Raises:
            StructuredOutputError: no valid choice after the retries.
            LLMCallError: the call failed.
        """
        groups = self.module_tools(readonly)
        if len(groups) == 1:
            return next(iter(groups))
        if self.llm is None:
            raise ToolCallError(f"{type(self).__name__} needs an LLM")
        if readonly not in self._choices:
            self._choices[readonly] = build_module_choice(list(groups))
        listing = "\n".join(f"- {key}: {self._descriptions[key]} (tools: {', '.join(tools)})" for key, tools in groups.items())
        messages = [
            {"role": "system", "content": MODULE_SYSTEM.render(
                agent_id=agent_id, world=self.get_world_description(), modules=listing, readonly_note=readonly_note(readonly))},
            {"role": "user", "content": MODULE_INSTRUCTION.render(
                time=self.t.isoformat() if self.t else "unknown", agent_id=agent_id, instruction=instruction)},
        ]
        choice = await complete_structured(self.llm, messages, self._choices[readonly], prompt=MODULE_INSTRUCTION,
                                           hint="Valid modules: " + ", ".join(groups))
        return choice.module  # type: ignore[attr-defined]  # the choice model is built at run time

    @abstractmethod
    async def run_in_module(
        self, module: str, tools: dict[str, ToolInfo], *, agent_id: Any, instruction: str, readonly: bool
    ) -> LoopOutcome:
        """Tier 2: route the ask using only ``tools`` (those of ``module``)."""

    async def ask(self, request: EnvRequest) -> EnvReply:
        if self.llm is None:
            raise ToolCallError(f"{type(self).__name__} needs an LLM")
        agent_id, readonly = request.agent_id, request.readonly
        instruction = resolve_instruction(request)
        groups = self.module_tools(readonly)
        if not groups:
            return LoopOutcome("fail", "no environment tool is available to this ask").finish()
        try:
            module = await self.choose_module(agent_id, instruction, readonly)
        except (StructuredOutputError, LLMCallError) as error:
            return unreadable(error).finish()
        outcome = await self.run_in_module(module, groups[module], agent_id=agent_id, instruction=instruction,
                                           readonly=readonly)
        return outcome.finish(module=module)


class TwoTierReActRouter(TwoTierRouter):
    """Tier 1 picks a module; tier 2 is the ReAct loop over that module's tools."""

    def __init__(self, env_modules: list[EnvBase], llm: ChatModel | None = None, *, meter: Meter | None = None,
                 max_steps: int = 3) -> None:
        super().__init__(env_modules, llm, meter=meter, max_steps=max_steps)
        self._decisions = DecisionCache(build_router_decision)

    async def run_in_module(
        self, module: str, tools: dict[str, ToolInfo], *, agent_id: Any, instruction: str, readonly: bool
    ) -> LoopOutcome:
        system = REACT_SYSTEM.render(
            agent_id=agent_id,
            world=f"{self.get_world_description()}\nYou are working in module {module}: {self._descriptions[module]}",
            tools=tool_lines(tools),
            readonly_note=readonly_note(readonly),
        )
        return await react_loop(self, tools, self._decisions(tools), system=system, agent_id=agent_id,
                                instruction=instruction, readonly=readonly)


class TwoTierPlanExecuteRouter(TwoTierRouter):
    """Tier 1 picks a module; tier 2 plans over that module's tools and executes the plan.

    Args:
        max_replans: replan calls after failing steps, per ask.
    """

    Config = PlanExecuteRouter.Config

    def __init__(self, env_modules: list[EnvBase], llm: ChatModel | None = None, *, meter: Meter | None = None,
                 max_steps: int = 3, max_replans: int = 1) -> None:
        super().__init__(env_modules, llm, meter=meter, max_steps=max_steps)
        self.executor = PlanExecutor(max_steps, max_replans)

    async def run_in_module(
        self, module: str, tools: dict[str, ToolInfo], *, agent_id: Any, instruction: str, readonly: bool
    ) -> LoopOutcome:
        return await self.executor.run(self, tools, agent_id=agent_id, instruction=instruction, readonly=readonly)
