"""PlanExecuteRouter: one structured plan of tool calls, executed in order, replanned once on a failure.

A plan costs one LLM call however many steps it has (ReAct costs one per step); the price is that
steps cannot use each other's results, so a failing step triggers a bounded replan that sees them.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from engine.env.base import EnvBase
from engine.env.requests import EnvReply, EnvRequest
from engine.env.router_base import RouterBase, RouterConfig
from engine.env.routers.decision import FINAL_ANSWER, FinalAnswerArgs
from engine.env.routers.decision import _llm_args_model as llm_arguments
from engine.env.routers.prompts import PLAN_INSTRUCTION, PLAN_SYSTEM, REPLAN_INSTRUCTION
from engine.env.routers.react import (
    DecisionCache,
    LoopOutcome,
    readonly_note,
    resolve_instruction,
    run_tool,
    tool_lines,
    unreadable,
)
from engine.env.tool import ToolInfo
from engine.errors import LLMCallError, StructuredOutputError, ToolCallError
from engine.llm.meter import Meter
from engine.llm.protocol import ChatModel
from engine.llm.structured import complete_structured

__all__ = ["PlanExecuteRouter", "PlanExecutor", "build_plan_model"]

_FORBID = ConfigDict(extra="forbid")


def build_plan_model(tools: dict[str, ToolInfo], max_steps: int) -> type[BaseModel]:
    """A model ``{thought, steps: [{tool, arguments, purpose}]}`` with 1..``max_steps`` steps.

    Each step is one of ``tools`` (arguments pinned by its schema, caller fields left out) or
    ``final_answer``.

    Args:
        tools: the tools a step may call, by router name.
        max_steps: the longest plan accepted.
    """

    def branch(name: str, arguments: type[BaseModel]) -> type[BaseModel]:
        tool_type: Any = Literal[name]  # built at run time, one literal per tool
        return create_model(f"PlanStep_{name}", __config__=_FORBID, tool=(tool_type, ...), arguments=(arguments, ...),
                            purpose=(str, Field(description="why this step is needed")))

    branches = [branch(name, llm_arguments(info)) for name, info in tools.items()]
    branches.append(branch(FINAL_ANSWER, FinalAnswerArgs))
    step: Any = branches[0] if len(branches) == 1 else Annotated[Union[tuple(branches)], Field(discriminator="tool")]  # noqa: UP007 - built at run time
    return create_model(
        "Plan",
        __config__=_FORBID,
        thought=(str, Field(description="brief reasoning")),
        steps=(list[step], Field(min_length=1, max_length=max_steps, description="the steps, run in order")),
    )


class PlanExecutor:
    """Plans over a given tool set, runs the steps, replans after a failing step.

    Args:
        max_steps: longest plan, and tool calls per ask across replans.
        max_replans: replan calls per ask.
    """

    def __init__(self, max_steps: int, max_replans: int = 1) -> None:
        self.max_steps = max_steps
        self.max_replans = max_replans
        self.plan_model = DecisionCache(lambda tools: build_plan_model(tools, max_steps))

    async def run(
        self, router: RouterBase, tools: dict[str, ToolInfo], *, agent_id: Any, instruction: str, readonly: bool
    ) -> LoopOutcome:
        """Plan with one structured call over ``tools`` and execute it.

        A final answer is used only when no tool ran after the plan containing it was written (an
        answer written before the results would be a guess); otherwise the results are summarised.
        """
        if router.llm is None:
            raise ToolCallError(f"{type(router).__name__} needs an LLM")
        system = PLAN_SYSTEM.render(agent_id=agent_id, world=router.get_world_description(), tools=tool_lines(tools),
                                    max_steps=self.max_steps, readonly_note=readonly_note(readonly))
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": PLAN_INSTRUCTION.render(
                time=router.t.isoformat() if router.t else "unknown", agent_id=agent_id, instruction=instruction)},
        ]
        model, hint = self.plan_model(tools), "Valid tools: " + ", ".join([*tools, FINAL_ANSWER])
        try:
            plan = await complete_structured(router.llm, messages, model, prompt=PLAN_INSTRUCTION, hint=hint)
        except (StructuredOutputError, LLMCallError) as error:
            return unreadable(error)
        outcome, replans = LoopOutcome(), 0
        steps, ran_since_plan = list(plan.steps), 0  # type: ignore[attr-defined]  # the plan model is built at run time
        while steps:
            step = steps.pop(0)
            if step.tool == FINAL_ANSWER:
                if ran_since_plan == 0:
                    outcome.status, outcome.answer = step.arguments.status, step.arguments.answer
                break
            if len(outcome.results) >= self.max_steps:
                outcome.status = "in_progress"
                break
            row = await run_tool(router, tools[step.tool], step.tool, step.arguments.model_dump(),
                                 agent_id=agent_id, readonly=readonly)
            outcome.results.append(row)
            ran_since_plan += 1
            outcome.status = "success" if row.ok else "fail"
            if row.ok:
                continue
            if replans >= self.max_replans:
                break
            replans += 1
            history = "\n".join(f"- {r.tool}({r.arguments}) -> {r.result}" for r in outcome.results)
            messages = [
                *messages,
                {"role": "assistant", "content": plan.model_dump_json()},
                {"role": "user", "content": REPLAN_INSTRUCTION.render(history=history, failed_tool=row.tool,
                                                                      error=row.result)},
            ]
            try:
                plan = await complete_structured(router.llm, messages, model, prompt=REPLAN_INSTRUCTION, hint=hint)
            except (StructuredOutputError, LLMCallError) as error:
                failed = unreadable(error)
                outcome.status, outcome.answer = failed.status, failed.answer
                break
            steps, ran_since_plan = list(plan.steps), 0  # type: ignore[attr-defined]  # the plan model is built at run time
        return outcome


class PlanExecuteRouter(RouterBase):
    """Plan-and-execute routing with structured plans (small local models can drive it).

    Args:
        env_modules: the modules, in spec order.
        llm: the routing model.
        meter: where the router's LLM usage accumulates.
        max_steps: longest plan, and tool calls per ask across replans.
        max_replans: replan calls after failing steps, per ask.
    """

    class Config(RouterConfig):
        max_replans: int = Field(1, ge=0, le=20, description="replan calls after failing steps, per ask")

    def __init__(
        self, env_modules: list[EnvBase], llm: ChatModel | None = None, *, meter: Meter | None = None,
        max_steps: int = 3, max_replans: int = 1,
    ) -> None:
        super().__init__(env_modules, llm, meter=meter, max_steps=max_steps)
        self.executor = PlanExecutor(max_steps, max_replans)

    async def ask(self, request: EnvRequest) -> EnvReply:
        outcome = await self.executor.run(
            self, self.tools(readonly=request.readonly), agent_id=request.agent_id,
            instruction=resolve_instruction(request), readonly=request.readonly,
        )
        return outcome.finish()
