"""AgentSocietyHelper: answer the experimenter's questions and carry out interventions by plan-and-execute.

One structured LLM call writes a plan (each step one helper tool with typed arguments); the steps
run in order; a failing step triggers a replan that sees every result so far (at most
``max_replans``); at most ``max_steps`` steps run in all; a last LLM call turns the question and the
real tool results into the answer. An ``ask`` is offered no mutating tool, and the toolbox refuses
one even if a plan names it. Apart from the awaited tools the loop does no I/O.

Intervention messages and env changes are queued by the env modules; the caller applies them with
``EnvRouterActor.end_consult`` (``RouterBase.apply_pending()``) so agents see them in the next tick.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, create_model

from engine.env.handle import EnvHandle
from engine.errors import BudgetExhaustedError, LLMCallError, PolisError, StructuredOutputError
from engine.llm.protocol import ChatModel
from engine.llm.structured import complete_structured
from engine.society.experimenter.prompts import (
    ANSWER_GOALS,
    HELPER_ANSWER,
    HELPER_PLAN,
    HELPER_REPLAN,
    HELPER_SYSTEM,
    LABELS,
    MODE_NOTES,
    STEP_LIMIT_NOTE,
)
from engine.society.experimenter.tools import HelperKind, HelperTool, HelperToolbox, SocietyView

__all__ = [
    "AgentSocietyHelper",
    "ExecutedStep",
    "HelperAnswer",
    "HelperResult",
    "Plan",
    "PlanStep",
    "SocietyView",
    "build_plan_model",
]

_FORBID = ConfigDict(extra="forbid")
#: characters of one tool result shown to the LLM (the full result stays in the HelperResult)
_RESULT_CHARS = 3000


class PlanStep(BaseModel):
    """A single step in the execution plan."""

    description: str  #: what this step does
    tool: str  #: the helper tool to use
    args: dict[str, Any]  #: arguments for the tool
    expected_output: str  #: what the step should produce


class Plan(BaseModel):
    """One plan (the first, or a replan after a failed step)."""

    reasoning: str
    steps: list[PlanStep]


class ExecutedStep(BaseModel):
    """A step that ran, with its real result (an error text when ``ok`` is False)."""

    number: int  #: 1-based, in execution order across plans
    description: str
    tool: str
    args: dict[str, Any]
    result: Any
    ok: bool


class HelperAnswer(BaseModel):
    """The final LLM call's output."""

    model_config = _FORBID
    answer: str = Field(description="the reply to the experimenter, based only on the tool results")


class HelperResult(BaseModel):
    """What one ask or intervene did: plans, executed steps, the answer or the error."""

    kind: HelperKind
    text: str  #: the question or the instruction
    t: datetime | None = None  #: simulated time when it ran
    status: Literal["ok", "failed"] = "ok"
    answer: str | None = None
    plans: list[Plan] = Field(default_factory=list)
    steps: list[ExecutedStep] = Field(default_factory=list)
    replans: int = 0
    step_limit_reached: bool = False
    error: str | None = None

    @property
    def reply(self) -> str:
        """The answer, or a plain statement of the failure (never an invented answer)."""
        return self.answer if self.status == "ok" and self.answer is not None else f"[failed] {self.error}"

    def to_json(self) -> str:
        return self.model_dump_json()

    def to_row(self) -> dict[str, Any]:
        """This result's columns of the ``society_queries`` dataset (the caller adds run, step_index, step).

        ``steps_json`` holds the executed steps as JSON-able data (the json column encodes it); the
        plans are in :meth:`to_json`.
        """
        return {
            "kind": self.kind, "text": self.text, "t": self.t, "status": self.status, "answer": self.answer,
            "replans": self.replans, "steps_json": [s.model_dump(mode="json") for s in self.steps], "error": self.error,
        }


def build_plan_model(tools: dict[str, HelperTool], max_steps: int) -> type[BaseModel]:
    """The plan schema the LLM fills: 1..``max_steps`` steps, each one of ``tools`` with typed args."""

    def branch(name: str, tool: HelperTool) -> type[BaseModel]:
        tool_type: Any = Literal[name]  # one literal per tool, built at run time
        return create_model(
            f"HelperStep_{name}", __config__=_FORBID,
            description=(str, Field(description="what this step does")), tool=(tool_type, ...),
            args=(tool.args_model, ...), expected_output=(str, Field(description="what it should produce")),
        )

    branches = [branch(name, tool) for name, tool in tools.items()]
    step: Any = branches[0] if len(branches) == 1 else Annotated[Union[tuple(branches)], Field(discriminator="tool")]  # noqa: UP007 - built at run time
    return create_model(
        "HelperPlan", __config__=_FORBID,
        reasoning=(str, Field(description="brief reasoning")),
        steps=(list[step], Field(min_length=1, max_length=max_steps, description="the steps, run in order")),
    )


def _shown(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _RESULT_CHARS else text[:_RESULT_CHARS] + f"... ({len(text) - _RESULT_CHARS} more characters)"


def _history(steps: list[ExecutedStep]) -> str:
    lines = [f"- step {s.number} {s.tool}({json.dumps(s.args, ensure_ascii=False)}) -> "
             f"{'ok' if s.ok else 'FAILED'}: {_shown(s.result)}" for s in steps]
    return "\n".join(lines) or "(none)"


class AgentSocietyHelper:
    """Plan-and-execute helper behind ``AgentSociety.ask`` and ``AgentSociety.intervene``.

    Args:
        env_router: RouterBase or EnvRouterProxy (``ask`` and ``call_tool``).
        society: the society view (time, ids, specs, asking agents).
        llm: the model that plans and answers (already metered / retried by the caller).
        max_steps: most steps executed per ask or intervene, across replans.
        max_replans: most replans after failed steps.
        max_llm_call_retry: structured-output attempts per planning or answer call.
        max_ask_agents: most agents one ask_agents step may question.
    """

    def __init__(self, env_router: EnvHandle, society: SocietyView, *, llm: ChatModel, max_steps: int = 8,
                 max_replans: int = 2, max_llm_call_retry: int = 3, max_ask_agents: int = 20) -> None:
        self.toolbox = HelperToolbox(env_router, society, max_ask_agents=max_ask_agents)
        self.society = society
        self.llm = llm
        self.max_steps = max_steps
        self.max_replans = max_replans
        self.max_llm_call_retry = max_llm_call_retry
        self._plan_models: dict[str, type[BaseModel]] = {}

    async def ask(self, question: str) -> HelperResult:
        """Answer a question with read-only tools only."""
        return await self._run("ask", question)

    async def intervene(self, instruction: str) -> HelperResult:
        """Carry out an intervention (queued env changes and messages; the caller settles them)."""
        return await self._run("intervene", instruction)

    async def apply(self, text: str, calls: list[tuple[str, dict[str, Any]]]) -> HelperResult:
        """Carry out an intervention given as env tool calls (tool, arguments), as written: no LLM call.

        A call that fails ends it, failed, with the calls before it done (the caller settles what they queued).
        """
        result = HelperResult(kind="intervene", text=text, t=self.society.current_time)
        for tool, arguments in calls:
            step = await self._execute("intervene", PlanStep(description=f"call {tool}", tool="call_env_tool",
                                                             args={"name": tool, "arguments": arguments},
                                                             expected_output="its result"), result.steps)
            result.steps.append(step)
            if not step.ok:
                return self._fail(result, f"call {step.number} ({tool}) failed: {_shown(step.result)}")
        result.answer = "\n".join(f"{s.args['name']}: {_shown(s.result['result'])}" for s in result.steps)
        return result

    # ---- the loop -------------------------------------------------------------------------------
    async def _run(self, kind: HelperKind, text: str) -> HelperResult:
        result = HelperResult(kind=kind, text=text, t=self.society.current_time)
        tools = self.toolbox.tools(kind)
        model = self._plan_models.get(kind) or self._plan_models.setdefault(kind, build_plan_model(tools, self.max_steps))
        system = HELPER_SYSTEM.render(
            agent_count=len(self.society.agent_ids), time=result.t.isoformat() if result.t else "unknown",
            mode_note=MODE_NOTES[kind], tools="\n".join(f"- {t.signature_line()}: {t.description}" for t in tools.values()),
            max_steps=self.max_steps,
        )
        messages = [{"role": "system", "content": system},
                    {"role": "user", "content": HELPER_PLAN.render(label=LABELS[kind], text=text, first=1)}]
        plan = await self._plan(result, messages, model, HELPER_PLAN)
        queue = list(plan.steps) if plan else []
        while queue:
            if len(result.steps) >= self.max_steps:
                result.step_limit_reached = True
                break
            step = await self._execute(kind, queue.pop(0), result.steps)
            result.steps.append(step)
            if step.ok:
                continue
            if result.replans >= self.max_replans or len(result.steps) >= self.max_steps:
                limit = "no replans left" if result.replans >= self.max_replans else "the step limit is reached"
                return self._fail(result, f"step {step.number} ({step.tool}) failed: {_shown(step.result)}; {limit}")
            result.replans += 1
            messages = [*messages, {"role": "assistant", "content": plan.model_dump_json() if plan else ""},
                        {"role": "user", "content": HELPER_REPLAN.render(
                            history=_history(result.steps), failed=step.number, error=_shown(step.result),
                            first=len(result.steps) + 1)}]
            plan = await self._plan(result, messages, model, HELPER_REPLAN)
            queue = list(plan.steps) if plan else []
        if result.status == "failed":
            return result
        return await self._answer(result)

    async def _plan(self, result: HelperResult, messages: list[dict[str, Any]], model: type[BaseModel],
                    prompt: Any) -> Plan | None:
        """One planning call; on failure the result is marked failed and None returned."""
        try:
            raw = await complete_structured(self.llm, messages, model, prompt=prompt,
                                            max_attempts=self.max_llm_call_retry,
                                            hint="Valid tools: " + ", ".join(self.toolbox.tools(result.kind)))
        except (StructuredOutputError, LLMCallError) as error:
            self._fail(result, f"planning failed: {error}")
            return None
        plan = Plan(reasoning=raw.reasoning, steps=[  # type: ignore[attr-defined]  # the plan model is built at run time
            PlanStep(description=s.description, tool=s.tool, args=s.args.model_dump(), expected_output=s.expected_output)
            for s in raw.steps  # type: ignore[attr-defined]  # the plan model is built at run time
        ])
        result.plans.append(plan)
        return plan

    async def _execute(self, kind: HelperKind, step: PlanStep, done: list[ExecutedStep]) -> ExecutedStep:
        earlier = [s.result if s.ok else None for s in done]
        number = len(done) + 1
        try:
            value = await self.toolbox.call(kind, step.tool, step.args, earlier)
        except BudgetExhaustedError:
            raise  # the run stops cleanly; not a step failure to plan around
        except PolisError as error:
            return ExecutedStep(number=number, description=step.description, tool=step.tool, args=step.args,
                                result=f"error: {error}", ok=False)
        return ExecutedStep(number=number, description=step.description, tool=step.tool, args=step.args,
                            result=value, ok=True)

    async def _answer(self, result: HelperResult) -> HelperResult:
        note = STEP_LIMIT_NOTE.render(max_steps=self.max_steps) if result.step_limit_reached else ""
        content = HELPER_ANSWER.render(label=LABELS[result.kind], text=result.text, results=_history(result.steps),
                                       note=note, goal=ANSWER_GOALS[result.kind])
        try:
            final = await complete_structured(self.llm, [{"role": "user", "content": content}], HelperAnswer,
                                              prompt=HELPER_ANSWER, max_attempts=self.max_llm_call_retry)
        except (StructuredOutputError, LLMCallError) as error:
            return self._fail(result, f"the final answer failed: {error}")
        result.answer = final.answer
        return result

    @staticmethod
    def _fail(result: HelperResult, error: str) -> HelperResult:
        result.status, result.error = "failed", error
        return result
