"""CodeGenRouter's final_summary: one more LLM call turns the executed code's results into the answer."""

from __future__ import annotations

from typing import Any

from engine.env.modules.messaging import MessagingSpace
from engine.env.requests import EnvRequest
from engine.env.routers.codegen import CodeGenRouter
from engine.errors import LLMCallError
from engine.llm.backends.scripted import ScriptedModel

CODE = {"thought": "ok", "code": 'results["answer"] = read_inbox()'}


class FailingSecondCall(ScriptedModel):
    """Answers the code call, then fails (the summary call)."""

    async def complete(self, messages: list[dict[str, Any]], **kwargs: Any):  # type: ignore[no-untyped-def]
        if self.requests:
            self.requests.append({"messages": messages, **kwargs})
            raise LLMCallError("provider down")
        return await super().complete(messages, **kwargs)


async def _ask(llm: ScriptedModel, final_summary: bool) -> str:
    router = CodeGenRouter([MessagingSpace()], llm, final_summary=final_summary)
    try:
        reply = await router.ask(EnvRequest("ask", 3, "any mail?", readonly=True))
    finally:
        await router.close()
    assert reply.status == "success" and reply.code_results == {"answer": "Your inbox is empty."}
    return reply.answer


async def test_with_final_summary_the_answer_is_the_summary_calls() -> None:
    llm = ScriptedModel([CODE, "Nobody has written to you yet."])
    assert await _ask(llm, final_summary=True) == "Nobody has written to you yet."
    summary = llm.requests[1]
    assert summary["prompt"].startswith("router.codegen.summary@")
    assert "any mail?" in summary["messages"][0]["content"] and "Your inbox is empty." in summary["messages"][0]["content"]


async def test_without_final_summary_the_results_are_the_answer_and_no_call_is_made() -> None:
    llm = ScriptedModel([CODE])
    assert await _ask(llm, final_summary=False) == "Your inbox is empty."
    assert len(llm.requests) == 1


async def test_a_failed_summary_call_answers_with_the_results() -> None:
    llm = FailingSecondCall([CODE])
    assert await _ask(llm, final_summary=True) == "Your inbox is empty."
    assert len(llm.requests) == 2
