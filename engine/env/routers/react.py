"""ReActRouter: per turn the LLM picks one tool call (JSON-schema decision), until done."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from engine.env.prompts import REACT_INSTRUCTION, REACT_SYSTEM
from engine.env.router_base import RouterBase
from engine.env.routers.decision import FINAL_ANSWER, build_router_decision, caller_fields
from engine.errors import LLMCallError, StructuredOutputError, ToolCallError
from engine.llm.structured import complete_structured

__all__ = ["ReActRouter"]


class ReActRouter(RouterBase):
    """ReAct-style tool selection with structured decisions (small local models can drive it)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._decisions: dict[bool, type[BaseModel]] = {}

    def decision_model(self, readonly: bool) -> type[BaseModel]:
        if readonly not in self._decisions:
            self._decisions[readonly] = build_router_decision(self.tools(readonly=readonly))
        return self._decisions[readonly]

    async def ask(
        self,
        ctx: dict[str, Any],
        instruction: str,
        readonly: bool = False,
        template_mode: bool = False,
        trace_id: str | None = None,
        parent_span_id: str | None = None,
    ) -> tuple[dict[str, Any], str]:
        if self.llm is None:
            raise ToolCallError("ReActRouter needs an LLM")
        if template_mode:
            instruction = instruction.format(**ctx.get("variables", {}))
        agent_id = ctx.get("agent_id")
        system = REACT_SYSTEM.render(
            agent_id=agent_id,
            world=self.get_world_description(),
            tools=self.tool_listing(readonly=readonly),
            readonly_note="\nThis ask is READ-ONLY: only read-only tools are offered." if readonly else "",
        )
        decision_model = self.decision_model(readonly)
        results: list[dict[str, Any]] = []
        status = "unknown"
        answer: str | None = None
        for _ in range(self.max_steps):
            history = "\n".join(f"Result of {r['tool']}: {r['result']}" for r in results)
            messages = [
                {"role": "system", "content": system},
                {"role": "user", "content": REACT_INSTRUCTION.render(
                    time=self.t.isoformat() if self.t else "unknown", agent_id=agent_id,
                    instruction=instruction, history=history)},
            ]
            try:
                decision = await complete_structured(
                    self.llm, messages, decision_model, prompt=REACT_INSTRUCTION,
                    hint="Valid tools: " + ", ".join([*self.tools(readonly=readonly), FINAL_ANSWER]),
                )
            except (StructuredOutputError, LLMCallError) as error:
                status, answer = "error", f"the environment could not interpret the request: {error}"
                break
            action = decision.action  # type: ignore[attr-defined]
            if action.tool == FINAL_ANSWER:
                status, answer = action.arguments.status, action.arguments.answer
                break
            arguments = action.arguments.model_dump()
            info = self.tools(readonly=readonly)[action.tool]
            if "agent_id" in info.args_model.model_fields and "agent_id" in caller_fields:
                arguments["agent_id"] = agent_id
            try:
                result = await self.call_tool(action.tool, arguments, readonly=readonly)
                results.append({"tool": action.tool, "arguments": arguments, "result": str(result), "ok": True})
                status = "success"
            except ToolCallError as error:
                results.append({"tool": action.tool, "arguments": arguments, "result": f"error: {error}", "ok": False})
                status = "fail"
            if decision.done:  # type: ignore[attr-defined]
                break
        else:
            if status == "success":
                status = "in_progress"
        if answer is None:
            answer = "\n".join(f"{r['tool']}: {r['result']}" for r in results) or "nothing was done"
        ctx = {**ctx, "status": status, "results": results}
        return ctx, answer
