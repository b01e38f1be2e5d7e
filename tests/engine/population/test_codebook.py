"""A survey's codebook: roles, labels instead of codes, respondents, and every bad input named by row and column."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from engine.errors import SpecError
from engine.population.codebook import Codebook, code_key, codebook_problem
from engine.spec import parse_spec

CODEBOOK = {
    "missing": [9],
    "columns": {
        "rid": {"role": "id"},
        "wt": {"role": "weight"},
        "relig": {"role": "persona", "name": "religious", "labels": {1: "not", 2: "mildly", 3: "strongly"}},
        "age": {"role": "persona"},
        "rate": {"role": "target", "question": "How do you rate your marriage?", "scale": "ordinal",
                 "labels": {1: "poor", 2: "fair", 3: "good"}, "retest_column": "rate2"},
    },
}
ROWS = [
    {"rid": "a", "wt": 1.5, "relig": 1, "age": 32, "rate": 3, "rate2": 3},
    {"rid": "b", "wt": 0.5, "relig": 3.0, "age": 27, "rate": 1, "rate2": 2},
    {"rid": "c", "wt": 1.0, "relig": 9, "age": 22, "rate": 9, "rate2": 9},
]


def test_codes_compare_as_numbers_where_they_are_numbers():
    assert code_key(1) == code_key(1.0) == code_key("1") == code_key(" 1 ") == 1.0
    assert code_key("DK") == "DK" and code_key(None) is None and code_key(float("nan")) is None


def test_profiles_show_labels_and_never_the_target_id_or_weight():
    book = Codebook.model_validate(CODEBOOK)
    assert codebook_problem(book, ROWS) is None
    assert book.profile(ROWS[0]) == {"religious": "not", "age": 32}
    assert book.profile(ROWS[1]) == {"religious": "strongly", "age": 27}
    assert book.profile(ROWS[2]) == {"age": 22}  # 9 is missing: the field is left out, nothing invented
    first, last = book.respondent(ROWS[0], 1), book.respondent(ROWS[2], 3)
    assert (first.id, first.weight, first.answers, first.retests) == ("a", 1.5, {"rate": 3.0}, {"rate": 3.0})
    assert last.answers == {"rate": None} and last.retests == {"rate": None}


@pytest.mark.parametrize(("change", "says"), [
    ({"rid": "a"}, "row 2, column 'rid': the id 'a' is also row 1's"),
    ({"wt": -1.0}, "row 2, column 'wt': the weight -1.0 is not a finite number of at least 0"),
    ({"wt": "NaN"}, "row 2, column 'wt': the weight 'NaN' is not a finite number of at least 0"),
    ({"relig": 4}, "row 2, column 'relig': the code 4 has no label"),
    ({"rate": 7}, "row 2, column 'rate': the code 7 has no label"),
    ({"rate2": 5}, "row 2, column 'rate2': the code 5 has no label in its target's labels"),
])
def test_a_bad_value_is_named_by_row_and_column(change, says):
    rows = [ROWS[0], {**ROWS[1], **change}, ROWS[2]]
    message, row, column = codebook_problem(Codebook.model_validate(CODEBOOK), rows)
    assert message.startswith(says) and row == 2 and column in message


def test_a_codebook_column_missing_from_the_data_is_named():
    rows = [{k: v for k, v in row.items() if k != "age"} for row in ROWS]
    message, row, column = codebook_problem(Codebook.model_validate(CODEBOOK), rows)
    assert column == "age" and row is None and "the codebook's column 'age' is not in the data" in message


@pytest.mark.parametrize(("change", "says"), [
    ({"rate": {"role": "target", "question": "Q?"}}, "target column 'rate' needs labels"),
    ({"rate": {"role": "target", "labels": {1: "x"}}}, "target column 'rate' needs its question"),
    ({"wt2": {"role": "weight"}}, "columns 'wt' and 'wt2' are both the weight"),
    ({"age": {"role": "persona", "name": "religious"}}, "columns 'relig' and 'age' are both named 'religious'"),
    ({"rate2": {"role": "persona"}}, "'rate''s retest column 'rate2' cannot have a role of its own"),
    ({"age": {"role": "persona", "labels": {1: "a", "1": "b"}}}, "the code 1 is listed twice"),
    ({"age": {"role": "persona", "retest": 0.8}}, "retest and retest_column belong to a target column"),
])
def test_a_codebook_that_cannot_be_read_says_why(change, says):
    with pytest.raises(ValidationError, match=says.replace("(", r"\(").replace(")", r"\)")):
        Codebook.model_validate({**CODEBOOK, "columns": {**CODEBOOK["columns"], **change}})


def survey_spec(**changes) -> dict:
    spec = {
        "name": "survey",
        "population": [{"rows": ROWS, "codebook": CODEBOOK}],
        "steps": [{"type": "questionnaire", "questionnaire_id": "fair", "from_survey": True}],
    }
    return {**spec, **changes}


def test_a_from_survey_questionnaire_asks_each_target_in_its_wording_with_its_labels_in_scale_order():
    spec = parse_spec(survey_spec())
    (question,) = spec.steps[0].questions
    assert question.model_dump(exclude_none=True) == {"id": "rate", "prompt": "How do you rate your marriage?",
                                                      "response_type": "choice", "choices": ["poor", "fair", "good"]}
    assert [a.profile for a in spec.all_agents()] == [{"religious": "not", "age": 32}, {"religious": "strongly", "age": 27},
                                                      {"age": 22}]
    # The stored spec keeps its rows, codebook and questions: read again, it is the same spec.
    assert parse_spec(spec.model_dump(mode="json")) == spec


def test_a_target_that_would_reach_a_prompt_is_a_spec_error():
    leaking = survey_spec(agents=[{"id": 100, "profile": {"name": "X", "rate": "good"}}])
    with pytest.raises(SpecError) as caught:
        parse_spec(leaking)
    assert caught.value.path == "agents.0.profile" and "target 'rate'" in str(caught.value)
    other = survey_spec(population=[survey_spec()["population"][0], {"rows": [{"name": "Y", "rate2": 1}], "id_start": 50}])
    with pytest.raises(SpecError) as caught:
        parse_spec(other)
    assert caught.value.path == "population.1" and "target 'rate2'" in str(caught.value)


def test_from_survey_without_a_survey_population_is_refused_at_its_field():
    with pytest.raises(SpecError) as caught:
        parse_spec({"name": "x", "agents": [{"id": 0}],
                    "steps": [{"type": "questionnaire", "questionnaire_id": "q", "from_survey": True}]})
    assert "from_survey" in caught.value.path or "questions" in str(caught.value)


def test_a_bad_row_in_a_survey_population_names_its_row_and_column():
    with pytest.raises(SpecError) as caught:
        parse_spec(survey_spec(population=[{"rows": [ROWS[0], {**ROWS[1], "relig": 7}], "codebook": CODEBOOK}]))
    assert "row 2, column 'relig': the code 7 has no label" in str(caught.value)
    assert caught.value.path.startswith("population.0")


def test_persona_shows_only_the_chosen_fields_for_an_ablation():
    spec = parse_spec(survey_spec(population=[{"rows": ROWS, "codebook": CODEBOOK, "persona": ["age"]}]))
    assert [a.profile for a in spec.all_agents()] == [{"age": 32}, {"age": 27}, {"age": 22}]
    with pytest.raises(SpecError, match="persona: 'relig' is not a persona field of the survey; its fields: religious, age"):
        parse_spec(survey_spec(population=[{"rows": ROWS, "codebook": CODEBOOK, "persona": ["relig"]}]))
