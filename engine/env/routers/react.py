"""ReActRouter: per turn the LLM picks one tool call (JSON-schema decision), until done.

The loop itself (:func:`react_loop`) runs over any subset of the router's tools, so the two-tier
and search-tool routers reuse it on the tools they selected.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from engine.env.prompts import REACT_INSTRUCTION, REACT_SYSTEM
from engine.env.requests import EnvReply, EnvRequest, EnvStatus, ToolCall
from engine.env.router_base import RouterBase
from engine.env.routers.decision import FINAL_ANSWER, build_router_decision, caller_fields
from engine.env.routers.template_cache import fill_template
from engine.env.tool import ToolInfo
from engine.errors import LLMCallError, StructuredOutputError, ToolCallError
from engine.llm.structured import complete_structured

__all__ = [
    "DecisionCache",
    "LoopOutcome",
    "ReActRouter",
    "react_loop",
    "readonly_note",
    "resolve_instruction",
    "run_tool",
    "tool_lines",
    "unreadable",
]


@dataclass
class LoopOutcome:
    """What one routing strategy did for one ask."""

    status: EnvStatus = "unknown"
    answer: str | None = None  #: the LLM's final answer, when it gave one
    results: list[ToolCall] = field(default_factory=list)  #: the calls made, in order

    def finish(self, *, module: str | None = None) -> EnvReply:
        """The reply ``RouterBase.ask`` returns; the answer summarises the results when the LLM gave none."""
        answer = self.answer
        if answer is None:
            answer = "\n".join(f"{r.tool}: {r.result}" for r in self.results) or "nothing was done"
        return EnvReply(answer, self.status, tuple(self.results), module=module)


class DecisionCache:
    """Decision models per offered tool set (building one walks every tool's schema).

    Args:
        build: makes the model for a tool set.
        maxsize: tool sets kept; the oldest is dropped beyond it.
    """

    def __init__(self, build: Callable[[dict[str, ToolInfo]], type[BaseModel]], maxsize: int = 128) -> None:
        self._build = build
        self._maxsize = maxsize
        self._models: dict[tuple[str, ...], type[BaseModel]] = {}

    def __call__(self, tools: dict[str, ToolInfo]) -> type[BaseModel]:
        key = tuple(tools)
        model = self._models.get(key)
        if model is None:
            if len(self._models) >= self._maxsize:
                self._models.pop(next(iter(self._models)))
            model = self._models[key] = self._build(tools)
        return model


def tool_lines(tools: dict[str, ToolInfo]) -> str:
    """The tools as the prompt lists them (one pyi-like line each)."""
    return "\n".join(f"- {info.signature_line()}: {info.description}" for info in tools.values())


def readonly_note(readonly: bool) -> str:
    return "\nThis ask is READ-ONLY: only read-only tools are offered." if readonly else ""


def unreadable(error: Exception) -> LoopOutcome:
    """The outcome when no valid decision came back: status error, nothing invented."""
    return LoopOutcome("error", f"the environment could not interpret the request: {error}")


def resolve_instruction(request: EnvRequest) -> str:
    """The instruction, filled from ``request.variables`` in template mode."""
    # Bare {name} substitution only: str.format would let a template reach attributes ({x.__class__}).
    return fill_template(request.instruction, request.variables or {}) if request.template_mode else request.instruction


async def run_tool(
    router: RouterBase, info: ToolInfo, name: str, arguments: dict[str, Any], *, agent_id: Any, readonly: bool
) -> ToolCall:
    """Call one decided tool, filling caller fields from the request; returns the call."""
    arguments = dict(arguments)
    if "agent_id" in info.args_model.model_fields and "agent_id" in caller_fields:
        arguments["agent_id"] = agent_id
    try:
        result = await router.call_tool(name, arguments, readonly=readonly)
    except ToolCallError as error:
        return ToolCall(name, arguments, f"error: {error}", False)
    return ToolCall(name, arguments, str(result), True)


async def react_loop(
    router: RouterBase,
    tools: dict[str, ToolInfo],
    decision_model: type[BaseModel],
    *,
    system: str,
    agent_id: Any,
    instruction: str,
    readonly: bool,
) -> LoopOutcome:
    """Up to ``router.max_steps`` turns of one structured decision each, over ``tools`` only.

    Args:
        router: supplies the LLM, the clock, the step limit and tool execution.
        tools: the tools offered (by router name); ``decision_model`` must offer exactly these.
        decision_model: built with :func:`build_router_decision` from ``tools``.
        system: the rendered system prompt.
        agent_id: the caller, filled into tools' ``agent_id``.
        instruction: the caller's instruction.
        readonly: run tools in readonly mode.
    """
    if router.llm is None:
        raise ToolCallError(f"{type(router).__name__} needs an LLM")
    outcome = LoopOutcome()
    hint = "Valid tools: " + ", ".join([*tools, FINAL_ANSWER])
    for _ in range(router.max_steps):
        history = "\n".join(f"Result of {r.tool}: {r.result}" for r in outcome.results)
        messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": REACT_INSTRUCTION.render(
                time=router.t.isoformat() if router.t else "unknown", agent_id=agent_id,
                instruction=instruction, history=history)},
        ]
        try:
            decision = await complete_structured(router.llm, messages, decision_model, prompt=REACT_INSTRUCTION, hint=hint)
        except (StructuredOutputError, LLMCallError) as error:
            failed = unreadable(error)
            outcome.status, outcome.answer = failed.status, failed.answer
            break
        action = decision.action  # type: ignore[attr-defined]  # the decision model is built at run time
        if action.tool == FINAL_ANSWER:
            outcome.status, outcome.answer = action.arguments.status, action.arguments.answer
            break
        row = await run_tool(router, tools[action.tool], action.tool, action.arguments.model_dump(),
                             agent_id=agent_id, readonly=readonly)
        outcome.results.append(row)
        outcome.status = "success" if row.ok else "fail"
        if decision.done:  # type: ignore[attr-defined]  # the decision model is built at run time
            break
    else:
        if outcome.status == "success":
            outcome.status = "in_progress"
    return outcome


class ReActRouter(RouterBase):
    """ReAct-style tool selection with structured decisions (small local models can drive it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._decisions = DecisionCache(build_router_decision)

    def decision_model(self, readonly: bool) -> type[BaseModel]:
        return self._decisions(self.tools(readonly=readonly))

    async def ask(self, request: EnvRequest) -> EnvReply:
        if self.llm is None:
            raise ToolCallError("ReActRouter needs an LLM")
        agent_id, readonly = request.agent_id, request.readonly
        system = REACT_SYSTEM.render(
            agent_id=agent_id,
            world=self.get_world_description(),
            tools=self.tool_listing(readonly=readonly),
            readonly_note=readonly_note(readonly),
        )
        outcome = await react_loop(
            self, self.tools(readonly=readonly), self.decision_model(readonly), system=system, agent_id=agent_id,
            instruction=resolve_instruction(request), readonly=readonly,
        )
        return outcome.finish()
