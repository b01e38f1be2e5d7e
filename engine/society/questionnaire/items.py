"""Questionnaires: typed questions, the answer schema, and turning a reply into per-question answers.

Sans-IO: no LLM, Dask or disk. The answer schema has one field per question, ``{"value": <typed>,
"reason": str}``, with the type checks in the pydantic model (integers and floats within their
bounds, choices as a ``Literal``, JSON as an object or array, text not blank), so
:func:`~engine.llm.structured.complete_structured` can feed violations back and retry (see
:mod:`engine.society.questionnaire.ask`). :func:`parse_reply` splits a reply per question: a field
that is valid on its own is an answer, every other question is a failure with its error and the
raw text. No value is ever guessed.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictFloat,
    StrictInt,
    StrictStr,
    ValidationError,
    computed_field,
    create_model,
    model_validator,
)

from engine.errors import SpecError
from engine.llm.budget import Usage
from engine.society.questionnaire.prompts import QUESTIONNAIRE_BOUNDS, QUESTIONNAIRE_RESPONSE_FORMS
from engine.spec import QuestionnaireStep, QuestionSpec

__all__ = [
    "QuestionItem",
    "Questionnaire",
    "QuestionnaireAnswer",
    "QuestionnaireResponse",
    "answer_model",
    "failed_answers",
    "parse_reply",
    "question_form",
]

ResponseType = Literal["text", "integer", "float", "choice", "json"]


class QuestionItem(BaseModel):
    """One question (mirrors :class:`engine.spec.QuestionSpec`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(min_length=1)  #: the key of the answer; unique within a questionnaire
    prompt: str = Field(min_length=1)  #: the question as the agent reads it
    response_type: ResponseType = "text"
    choices: tuple[str, ...] | None = None  #: the allowed answers of a ``choice`` question
    min: float | None = None  #: inclusive lower bound of ``integer`` / ``float`` answers
    max: float | None = None  #: inclusive upper bound of ``integer`` / ``float`` answers

    @model_validator(mode="after")
    def _check(self) -> QuestionItem:
        if self.response_type == "choice" and not self.choices:
            raise ValueError("response_type 'choice' needs a non-empty 'choices' list")
        if self.choices is not None and len(set(self.choices)) != len(self.choices):
            raise ValueError(f"question {self.id!r} repeats a choice")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(f"question {self.id!r}: min {self.min} > max {self.max}")
        low, high = self.bounds()
        if self.response_type == "integer" and low is not None and high is not None and low > high:
            raise ValueError(f"question {self.id!r}: no integer lies in [{self.min}, {self.max}]")
        return self

    def bounds(self) -> tuple[float | None, float | None]:
        """The inclusive range of numeric answers (rounded inwards for integers)."""
        if self.response_type == "integer":
            return (None if self.min is None else math.ceil(self.min)), (None if self.max is None else math.floor(self.max))
        return self.min, self.max

    @classmethod
    def from_spec(cls, spec: QuestionSpec) -> QuestionItem:
        return cls(**spec.model_dump())


class Questionnaire(BaseModel):
    """A questionnaire: an id, a title and description shown to the agent, and its questions."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    questionnaire_id: str = Field(min_length=1)
    title: str = ""
    description: str = ""
    questions: tuple[QuestionItem, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique_ids(self) -> Questionnaire:
        ids = [q.id for q in self.questions]
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        if dupes:
            raise ValueError(f"questionnaire {self.questionnaire_id!r} repeats question ids {dupes}")
        return self

    @classmethod
    def from_step(cls, step: QuestionnaireStep) -> Questionnaire:
        """Build from a spec step.

        Raises:
            SpecError: the step's questions cannot be asked (a bound no integer fits, ...).
        """
        try:
            return cls(
                questionnaire_id=step.questionnaire_id, title=step.title or "", description=step.description or "",
                questions=tuple(QuestionItem.from_spec(q) for q in step.questions),
            )
        except ValidationError as error:
            raise SpecError(f"questionnaire {step.questionnaire_id!r}: {error}") from None


class QuestionnaireAnswer(BaseModel):
    """One agent's answer to one question; ``value`` is None unless ``parse_success``."""

    agent_id: int
    question_id: str
    raw_text: str | None = None  #: the model's raw answer to this question (the whole reply if it had none)
    value: Any = None
    reason: str | None = None
    parse_success: bool
    error: str | None = None
    attempts: int = 0  #: structured-output attempts made (0: the model was never asked)


class QuestionnaireResponse(BaseModel):
    """Every answer of one questionnaire run, with counts and the LLM usage it took."""

    questionnaire_id: str
    answers: list[QuestionnaireAnswer] = Field(default_factory=list)
    llm_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    usage: Usage = Field(default_factory=Usage)  #: provider usage (what budgets count)

    @computed_field  # type: ignore[prop-decorator]  # mypy refuses decorators over @property (pydantic documents this ignore)
    @property
    def ok(self) -> int:
        return sum(a.parse_success for a in self.answers)

    @computed_field  # type: ignore[prop-decorator]  # mypy refuses decorators over @property (pydantic documents this ignore)
    @property
    def failed(self) -> int:
        return len(self.answers) - self.ok

    @computed_field  # type: ignore[prop-decorator]  # mypy refuses decorators over @property (pydantic documents this ignore)
    @property
    def agents(self) -> int:
        """Agents asked."""
        return len({a.agent_id for a in self.answers})

    @computed_field  # type: ignore[prop-decorator]  # mypy refuses decorators over @property (pydantic documents this ignore)
    @property
    def agents_answered(self) -> int:
        """Agents with at least one valid answer."""
        return len({a.agent_id for a in self.answers if a.parse_success})

    def by_agent(self) -> dict[int, list[QuestionnaireAnswer]]:
        out: dict[int, list[QuestionnaireAnswer]] = {}
        for answer in self.answers:
            out.setdefault(answer.agent_id, []).append(answer)
        return out

    def to_json(self, *, indent: int | None = 2) -> str:
        """The whole response (answers and counts) as JSON text."""
        return self.model_dump_json(indent=indent)


# ---- the answer schema ------------------------------------------------------------------------
def _not_blank(text: str) -> str:
    if not text.strip():
        raise ValueError("the answer must not be blank")
    return text


def _is_container(value: Any) -> Any:
    if not isinstance(value, dict | list):
        raise ValueError("the answer must be a JSON object or array")
    return value


def _value_type(q: QuestionItem) -> Any:
    low, high = q.bounds()
    if q.response_type == "integer":
        return Annotated[StrictInt, Field(ge=low, le=high)]
    if q.response_type == "float":
        return Annotated[StrictFloat, Field(ge=low, le=high, allow_inf_nan=False)]
    if q.response_type == "choice":
        return Literal[q.choices]
    if q.response_type == "json":
        return Annotated[dict[str, Any] | list[Any], AfterValidator(_is_container)]
    return Annotated[StrictStr, Field(min_length=1), AfterValidator(_not_blank)]


@lru_cache(maxsize=64)
def _field_models(questionnaire: Questionnaire) -> tuple[type[BaseModel], ...]:
    return tuple(
        create_model(
            f"Q{i}Answer",
            __config__=ConfigDict(extra="forbid"),
            value=(_value_type(q), Field(description=question_form(q))),
            reason=(str, Field(description="one short sentence on why")),
        )
        for i, q in enumerate(questionnaire.questions)
    )


@lru_cache(maxsize=64)
def answer_model(questionnaire: Questionnaire) -> type[BaseModel]:
    """The pydantic model of a full reply: one field per question, named by the question id."""
    fields: dict[str, Any] = {
        f"q{i}": (model, Field(alias=q.id, description=q.prompt))
        for i, (q, model) in enumerate(zip(questionnaire.questions, _field_models(questionnaire), strict=True))
    }
    return create_model("QuestionnaireReply", __config__=ConfigDict(extra="forbid"), **fields)


def question_form(q: QuestionItem) -> str:
    """How ``q``'s answer must look, in words (shown to the model)."""
    low, high = q.bounds()
    kind = "both" if low is not None and high is not None else "low" if low is not None else "high" if high is not None else "none"
    bounds = QUESTIONNAIRE_BOUNDS[kind].render(low=_num(low), high=_num(high))
    return QUESTIONNAIRE_RESPONSE_FORMS[q.response_type].render(bounds=bounds, choices=", ".join(q.choices or ()))


def _num(x: float | None) -> str:
    return "" if x is None else str(int(x)) if float(x).is_integer() else str(x)


# ---- reading a reply ----------------------------------------------------------------------------
def parse_reply(
    questionnaire: Questionnaire, agent_id: int, text: str | None, *, attempts: int, error: str | None = None
) -> list[QuestionnaireAnswer]:
    """Split a reply into one answer per question, validating each question's field on its own.

    Args:
        questionnaire: what was asked.
        agent_id: who answered.
        text: the reply (the final one, after ``attempts`` attempts).
        attempts: structured-output attempts made.
        error: why the reply as a whole was refused, if it was (kept when it is not a JSON object).

    Returns:
        Answers in question order; a missing or invalid field is a failure without a value.
    """
    after = f" after {attempts} attempts"
    raw = _json_object(text)
    if raw is None:
        why = f"the reply is not a JSON object{after}" + (f": {error}" if error else "")
        return failed_answers(questionnaire, agent_id, why, raw_text=text, attempts=attempts)
    out = []
    for q, model in zip(questionnaire.questions, _field_models(questionnaire), strict=True):
        if q.id not in raw:
            out.append(QuestionnaireAnswer(agent_id=agent_id, question_id=q.id, raw_text=text, parse_success=False,
                                           error=f"no answer to {q.id!r}{after}", attempts=attempts))
            continue
        fragment = json.dumps(raw[q.id], ensure_ascii=False)
        try:
            field = model.model_validate_json(fragment)
        except ValidationError as invalid:
            problems = "; ".join(".".join(map(str, (q.id, *e["loc"]))) + f": {e['msg']}" for e in invalid.errors()[:5])
            out.append(QuestionnaireAnswer(agent_id=agent_id, question_id=q.id, raw_text=fragment, parse_success=False,
                                           error=f"invalid{after}: {problems}", attempts=attempts))
            continue
        out.append(QuestionnaireAnswer(agent_id=agent_id, question_id=q.id, raw_text=fragment, value=field.value,  # type: ignore[attr-defined]  # the answer model is built at run time
                                       reason=field.reason, parse_success=True, attempts=attempts))  # type: ignore[attr-defined]  # the answer model is built at run time
    return out


def failed_answers(
    questionnaire: Questionnaire, agent_id: int, error: str, *, raw_text: str | None = None, attempts: int = 0
) -> list[QuestionnaireAnswer]:
    """Every question of ``questionnaire`` failed for ``agent_id`` with ``error`` (no value)."""
    return [
        QuestionnaireAnswer(agent_id=agent_id, question_id=q.id, raw_text=raw_text, parse_success=False, error=error, attempts=attempts)
        for q in questionnaire.questions
    ]


def _json_object(text: str | None) -> dict[str, Any] | None:
    try:
        value = json.loads(text or "")
    except json.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None
