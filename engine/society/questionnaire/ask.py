"""Answering a questionnaire: one structured LLM call per agent, in character, split per question.

The call goes through the caller's model (an agent's metered model, so each attempt is recorded);
invalid replies are fed back and retried by :func:`~engine.llm.structured.complete_structured`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from engine.errors import LLMCallError, StructuredOutputError
from engine.llm.protocol import ChatModel, ChatResult
from engine.llm.structured import complete_structured
from engine.society.questionnaire.items import (
    Questionnaire,
    QuestionnaireAnswer,
    answer_model,
    failed_answers,
    parse_reply,
    question_form,
)
from engine.society.questionnaire.prompts import QUESTIONNAIRE_ANSWER, QUESTIONNAIRE_PERSONA, QUESTIONNAIRE_QUESTION

__all__ = ["Persona", "answer_questionnaire", "build_messages"]


@dataclass(frozen=True)
class Persona:
    """What the answering agent is told about itself."""

    name: str
    profile: dict[str, Any]
    recent: list[str]  #: the agent's recent activity (``state["recent"]``)
    long_memory: str  #: its compacted memory (``AGENT_MEMORY.md``)
    time: datetime  #: simulated time of the questionnaire


def build_messages(persona: Persona, questionnaire: Questionnaire) -> list[dict[str, Any]]:
    """The system (persona) and user (questions) messages of the one call."""
    system = QUESTIONNAIRE_PERSONA.render(
        name=persona.name,
        profile="\n".join(f"- {k}: {v}" for k, v in persona.profile.items()) or "- (no profile)",
        time=persona.time.isoformat(),
        recent="\n".join(f"- {item}" for item in persona.recent) or "- (nothing yet)",
        long_memory=persona.long_memory.strip() or "(nothing yet)",
    )
    questions = "\n".join(
        QUESTIONNAIRE_QUESTION.render(id=q.id, form=question_form(q), prompt=q.prompt) for q in questionnaire.questions
    )
    user = QUESTIONNAIRE_ANSWER.render(
        title=questionnaire.title or questionnaire.questionnaire_id, description=questionnaire.description, questions=questions
    )
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


class _LastReply:
    """Keep the text of the last answer and count the calls (the raw text of each attempt)."""

    def __init__(self, inner: ChatModel) -> None:
        self._inner = inner
        self.text: str | None = None
        self.calls = 0

    async def complete(self, messages: list[dict[str, Any]], **kwargs: Any) -> ChatResult:
        self.calls += 1
        result = await self._inner.complete(messages, **kwargs)
        self.text = result.text
        return result


async def answer_questionnaire(
    llm: ChatModel, persona: Persona, questionnaire: Questionnaire, *, agent_id: int, max_attempts: int = 3
) -> list[QuestionnaireAnswer]:
    """Ask the whole questionnaire in one structured call (retried with feedback) and split the reply.

    Returns:
        One answer per question, in order. A call that fails, or a reply that never validates,
        gives failed answers that say why (per question where the final reply allows).

    Raises:
        BudgetExhaustedError: the budget refused the call (the caller records it).
    """
    reply = _LastReply(llm)
    try:
        await complete_structured(
            reply, build_messages(persona, questionnaire), answer_model(questionnaire),
            prompt=QUESTIONNAIRE_ANSWER, max_attempts=max_attempts,
        )
    except StructuredOutputError as error:
        # Questions the final reply answers validly keep that answer; the rest fail with the reason.
        return parse_reply(questionnaire, agent_id, error.last_text, attempts=error.attempts, error=str(error))
    except LLMCallError as error:
        return failed_answers(questionnaire, agent_id, f"LLM call failed: {error}", raw_text=reply.text, attempts=reply.calls)
    # The reply validated as a whole, so each field validates on its own: parse_reply keeps its raw text.
    return parse_reply(questionnaire, agent_id, reply.text, attempts=reply.calls)
