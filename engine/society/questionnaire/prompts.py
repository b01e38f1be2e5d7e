"""Named prompt templates of the society's low-frequency queries (questionnaires, ...).

Each block belongs to one feature; every LLM call records the name and hash of its template.
"""

from __future__ import annotations

from engine.llm.prompt import PromptTemplate

__all__ = [
    "QUESTIONNAIRE_ANSWER",
    "QUESTIONNAIRE_BOUNDS",
    "QUESTIONNAIRE_PERSONA",
    "QUESTIONNAIRE_QUESTION",
    "QUESTIONNAIRE_RESPONSE_FORMS",
]

# ---- questionnaire -------------------------------------------------------------------------------
QUESTIONNAIRE_PERSONA = PromptTemplate(
    "questionnaire.persona",
    "You are {name}, a person living in a simulated society.\n"
    "Your profile:\n{profile}\n\n"
    "Current simulated time: {time}.\n"
    "Your recent activity:\n{recent}\n\n"
    "What you remember from earlier:\n{long_memory}\n\n"
    "You are taking part in a survey. Answer every question in character, as yourself, "
    "consistently with your profile and your experience so far.",
)

QUESTIONNAIRE_ANSWER = PromptTemplate(
    "questionnaire.answer",
    "Questionnaire: {title}\n{description}\n\n"
    "Questions:\n{questions}\n\n"
    "Answer with one JSON object that has exactly one field per question id. Each field is an "
    'object {{"value": <your answer in the form the question asks for>, "reason": "<one short '
    'sentence on why>"}}. Keep numbers within their ranges and pick choices exactly as written.',
)

QUESTIONNAIRE_QUESTION = PromptTemplate("questionnaire.question", "- {id} ({form}): {prompt}")

#: How each response type is described to the model (``{bounds}`` is one of QUESTIONNAIRE_BOUNDS).
QUESTIONNAIRE_RESPONSE_FORMS: dict[str, PromptTemplate] = {
    "text": PromptTemplate("questionnaire.form.text", "free text, not empty"),
    "integer": PromptTemplate("questionnaire.form.integer", "a whole number{bounds}"),
    "float": PromptTemplate("questionnaire.form.float", "a number{bounds}"),
    "choice": PromptTemplate("questionnaire.form.choice", "exactly one of: {choices}"),
    "json": PromptTemplate("questionnaire.form.json", "a JSON object or array"),
}

#: The range of a numeric question, by which bounds it has.
QUESTIONNAIRE_BOUNDS: dict[str, PromptTemplate] = {
    "both": PromptTemplate("questionnaire.bounds.both", " from {low} to {high}"),
    "low": PromptTemplate("questionnaire.bounds.low", " of at least {low}"),
    "high": PromptTemplate("questionnaire.bounds.high", " of at most {high}"),
    "none": PromptTemplate("questionnaire.bounds.none", ""),
}
# ---- end questionnaire ---------------------------------------------------------------------------
