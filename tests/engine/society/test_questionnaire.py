"""Questionnaire answering without a cluster: typed validation, retries with feedback, failure rows."""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from engine.errors import LLMCallError, SpecError
from engine.llm.backends.scripted import ScriptedModel
from engine.llm.client import LLMClient
from engine.llm.dispatcher import get_chat_model
from engine.llm.meter import Meter, MeteredModel
from engine.llm.protocol import ChatResult
from engine.society.questionnaire.ask import Persona, answer_questionnaire, build_messages
from engine.society.questionnaire.items import Questionnaire, QuestionnaireResponse, answer_model, parse_reply
from engine.society.questionnaire.prompts import QUESTIONNAIRE_ANSWER
from engine.spec import QuestionnaireStep

T = datetime(2026, 1, 1, 12)
PERSONA = Persona(name="Ada", profile={"occupation": "teacher"}, recent=["2026-01-01T09:00:00: taught a class"],
                  long_memory="Ada likes her neighbours.", time=T)


@pytest.fixture
def survey() -> Questionnaire:
    return Questionnaire.from_step(QuestionnaireStep(
        questionnaire_id="wellbeing",
        title="Wellbeing",
        description="A short survey.",
        questions=[
            {"id": "happiness", "prompt": "How happy are you?", "response_type": "integer", "min": 1, "max": 7},
            {"id": "trust", "prompt": "Trust in neighbours?", "response_type": "float", "min": 0, "max": 1},
            {"id": "mood", "prompt": "Your mood?", "response_type": "choice", "choices": ["good", "neutral", "bad"]},
            {"id": "note", "prompt": "Anything else?", "response_type": "text"},
        ],
    ))


def _reply(happiness: Any = 5, trust: Any = 0.5, mood: Any = "good", note: Any = "fine") -> dict[str, Any]:
    return {
        "happiness": {"value": happiness, "reason": "a good week"},
        "trust": {"value": trust, "reason": "they help"},
        "mood": {"value": mood, "reason": "sunny"},
        "note": {"value": note, "reason": "nothing more"},
    }


async def test_a_valid_reply_gives_typed_values_in_one_call(survey):
    llm = ScriptedModel([_reply()])
    answers = await answer_questionnaire(llm, PERSONA, survey, agent_id=7)

    assert [a.question_id for a in answers] == ["happiness", "trust", "mood", "note"]
    assert all(a.parse_success and a.error is None and a.attempts == 1 and a.agent_id == 7 for a in answers)
    assert [a.value for a in answers] == [5, 0.5, "good", "fine"]
    assert isinstance(answers[1].value, float)
    assert answers[0].reason == "a good week"
    assert json.loads(answers[2].raw_text) == {"value": "good", "reason": "sunny"}
    (request,) = llm.requests
    assert request["prompt"] == QUESTIONNAIRE_ANSWER.id
    schema = request["response_format"]["json_schema"]["schema"]
    assert set(schema["required"]) == {"happiness", "trust", "mood", "note"}
    system, user = request["messages"]
    assert "Ada" in system["content"] and "teacher" in system["content"] and "taught a class" in system["content"]
    assert "likes her neighbours" in system["content"]
    assert "Wellbeing" in user["content"] and "from 1 to 7" in user["content"] and "good, neutral, bad" in user["content"]


async def test_out_of_range_answer_is_fed_back_and_the_corrected_one_kept(survey):
    llm = ScriptedModel([_reply(happiness=9), _reply(happiness=6)])
    answers = await answer_questionnaire(llm, PERSONA, survey, agent_id=1)

    assert all(a.parse_success and a.attempts == 2 for a in answers)
    assert answers[0].value == 6
    feedback = llm.requests[1]["messages"][-1]["content"]
    assert "happiness" in feedback and "less than or equal to 7" in feedback


async def test_never_valid_answer_fails_that_question_without_a_value(survey):
    llm = ScriptedModel([_reply(mood="ecstatic")] * 3)
    answers = await answer_questionnaire(llm, PERSONA, survey, agent_id=1, max_attempts=3)

    mood = answers[2]
    assert not mood.parse_success and mood.value is None and mood.reason is None
    assert mood.attempts == 3 and "mood" in mood.error and "after 3 attempts" in mood.error
    assert json.loads(mood.raw_text)["value"] == "ecstatic"
    # The other questions were validly answered in the final reply: those answers are the model's own.
    assert [a.parse_success for a in answers] == [True, True, False, True]
    assert len(llm.requests) == 3


async def test_a_reply_that_is_not_json_fails_every_question_and_keeps_the_text(survey):
    llm = ScriptedModel(["I am fine, thanks."] * 2)
    answers = await answer_questionnaire(llm, PERSONA, survey, agent_id=3, max_attempts=2)

    assert all(not a.parse_success and a.value is None for a in answers)
    assert {a.raw_text for a in answers} == {"I am fine, thanks."}
    assert all("after 2 attempts" in a.error for a in answers)


async def test_a_missing_question_fails_only_that_question(survey):
    partial = _reply()
    del partial["note"]
    answers = await answer_questionnaire(ScriptedModel([partial]), PERSONA, survey, agent_id=3, max_attempts=1)

    assert [a.parse_success for a in answers] == [True, True, True, False]
    assert "no answer to 'note'" in answers[3].error


def test_parse_reply_keeps_valid_fields_and_fails_the_rest_on_their_own(survey):
    text = json.dumps({**_reply(trust=2.5), "extra": {"value": 1, "reason": "?"}})
    answers = parse_reply(survey, 9, text, attempts=2, error="the whole reply was refused")

    trust = answers[1]
    assert [a.parse_success for a in answers] == [True, False, True, True]
    assert trust.error.startswith("invalid after 2 attempts: trust.value:") and trust.value is None
    assert json.loads(trust.raw_text) == {"value": 2.5, "reason": "they help"}
    listed = parse_reply(survey, 9, "[1, 2]", attempts=1, error="not an object")
    assert all(not a.parse_success and a.raw_text == "[1, 2]" and "not an object" in a.error for a in listed)


@pytest.mark.parametrize(
    ("field", "bad"),
    [("happiness", 4.5), ("happiness", "5"), ("happiness", True), ("trust", 1.5), ("trust", "high"),
     ("mood", "Good"), ("note", "   "), ("note", 42)],
)
async def test_typed_validation_rejects(survey, field, bad):
    answers = await answer_questionnaire(ScriptedModel([_reply(**{field: bad})]), PERSONA, survey, agent_id=1, max_attempts=1)

    by_id = {a.question_id: a for a in answers}
    assert not by_id[field].parse_success and by_id[field].value is None
    assert all(a.parse_success for q, a in by_id.items() if q != field)


async def test_json_questions_take_objects_and_arrays_only():
    q = Questionnaire(questionnaire_id="j", questions=({"id": "plan", "prompt": "Your plan?", "response_type": "json"},))
    ok = await answer_questionnaire(
        ScriptedModel([{"plan": {"value": {"go": "park"}, "reason": "r"}}]), PERSONA, q, agent_id=1, max_attempts=1
    )
    also = await answer_questionnaire(
        ScriptedModel([{"plan": {"value": [1, 2], "reason": "r"}}]), PERSONA, q, agent_id=1, max_attempts=1
    )
    bad = await answer_questionnaire(
        ScriptedModel([{"plan": {"value": "park", "reason": "r"}}]), PERSONA, q, agent_id=1, max_attempts=1
    )
    assert ok[0].value == {"go": "park"} and also[0].value == [1, 2]
    assert not bad[0].parse_success and bad[0].value is None


async def test_a_failed_call_fails_every_question_with_the_reason(survey):
    class Down:
        async def complete(self, messages, **kwargs) -> ChatResult:
            raise LLMCallError("provider unreachable", status=503)

    answers = await answer_questionnaire(Down(), PERSONA, survey, agent_id=2)

    assert all(not a.parse_success and "provider unreachable" in a.error and a.attempts == 1 for a in answers)


async def test_metered_calls_record_the_prompt_and_each_attempt(survey):
    meter = Meter()
    llm = MeteredModel(ScriptedModel([_reply(trust=-1), _reply()]), meter, caller="agent:4")
    await answer_questionnaire(llm, PERSONA, survey, agent_id=4)

    assert [(r.prompt_name, r.prompt_hash, r.attempt, r.caller) for r in meter.records] == [
        ("questionnaire.answer", QUESTIONNAIRE_ANSWER.hash, 1, "agent:4"),
        ("questionnaire.answer", QUESTIONNAIRE_ANSWER.hash, 2, "agent:4"),
    ]


async def test_the_simulated_llm_answers_every_type_validly():
    q = Questionnaire(questionnaire_id="all", questions=(
        {"id": "n", "prompt": "Count?", "response_type": "integer", "min": -2.5, "max": 3.5},
        {"id": "x", "prompt": "Share?", "response_type": "float", "min": 0.25, "max": 0.75},
        {"id": "c", "prompt": "Pick", "response_type": "choice", "choices": ["a", "b c", "d"]},
        {"id": "t", "prompt": "Say", "response_type": "text"},
        {"id": "j", "prompt": "Data", "response_type": "json"},
    ))
    llm = get_chat_model(LLMClient(model="sim/default", seed=3))
    for i in range(20):
        persona = Persona(name=f"P{i}", profile={"i": i}, recent=[], long_memory="", time=T)
        answers = {a.question_id: a for a in await answer_questionnaire(llm, persona, q, agent_id=i)}
        assert all(a.parse_success and a.attempts == 1 for a in answers.values()), answers
        assert isinstance(answers["n"].value, int) and -2 <= answers["n"].value <= 3
        assert isinstance(answers["x"].value, float) and 0.25 <= answers["x"].value <= 0.75
        assert answers["c"].value in ("a", "b c", "d")
        assert isinstance(answers["t"].value, str) and answers["t"].value.strip()
        assert isinstance(answers["j"].value, dict | list)


def test_questionnaire_rules_are_checked_up_front():
    with pytest.raises(ValueError, match="repeats question ids"):
        Questionnaire(questionnaire_id="d", questions=({"id": "a", "prompt": "?"}, {"id": "a", "prompt": "?"}))
    with pytest.raises(SpecError, match="no integer"):
        Questionnaire.from_step(QuestionnaireStep(
            questionnaire_id="i", questions=[{"id": "a", "prompt": "?", "response_type": "integer", "min": 1.2, "max": 1.8}]
        ))
    with pytest.raises(SpecError, match="min 5.0 > max 1.0"):
        Questionnaire.from_step(QuestionnaireStep(
            questionnaire_id="i", questions=[{"id": "a", "prompt": "?", "response_type": "float", "min": 5, "max": 1}]
        ))


def test_the_answer_schema_names_fields_by_question_id(survey):
    schema = answer_model(survey).model_json_schema()
    assert list(schema["properties"]) == ["happiness", "trust", "mood", "note"]
    assert schema["additionalProperties"] is False
    assert answer_model(survey) is answer_model(Questionnaire.model_validate(survey.model_dump()))


async def test_response_counts_and_json(survey):
    good = await answer_questionnaire(ScriptedModel([_reply()]), PERSONA, survey, agent_id=1)
    bad = await answer_questionnaire(ScriptedModel(["no"]), PERSONA, survey, agent_id=2, max_attempts=1)
    response = QuestionnaireResponse(questionnaire_id="wellbeing", answers=[*good, *bad])

    assert (response.ok, response.failed, response.agents, response.agents_answered) == (4, 4, 2, 1)
    assert set(response.by_agent()) == {1, 2}
    doc = json.loads(response.to_json())
    assert doc["ok"] == 4 and doc["agents_answered"] == 1 and len(doc["answers"]) == 8
    assert build_messages(PERSONA, survey)[0]["role"] == "system"
