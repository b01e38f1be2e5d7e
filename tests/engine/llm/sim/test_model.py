"""SimLLM: deterministic, schema-valid OpenAI chat completions and embeddings, in-process."""

from __future__ import annotations

import json
import math
from typing import Any

import jsonschema
import pytest

from engine.llm.sim import SimLLM, request_kind

PROFILE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 3},
        "age": {"type": "integer", "minimum": 0, "maximum": 120},
        "city": {"type": "string"},
        "hobbies": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 4},
        "score": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["name", "age", "city", "hobbies", "score"],
    "additionalProperties": False,
}
TOOLS: list[dict[str, Any]] = [
    {
        "type": "function",
        "function": {
            "name": "move",
            "description": "Move to a place.",
            "parameters": {
                "type": "object",
                "properties": {"place": {"type": "string"}, "speed": {"enum": ["walk", "run"]}},
                "required": ["place", "speed"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "say",
            "parameters": {
                "type": "object",
                "properties": {"text": {"type": "string", "maxLength": 30}, "loud": {"type": "boolean"}},
                "required": ["text"],
                "additionalProperties": False,
            },
        },
    },
]


def chat(content: str = "Tell me about the market today.", **extra: Any) -> dict[str, Any]:
    return {"model": "sim/default", "messages": [{"role": "user", "content": content}], **extra}


def structured(schema: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return chat(response_format={"type": "json_schema", "json_schema": {"name": "out", "schema": schema}}, **extra)


def test_same_seed_and_request_give_identical_output() -> None:
    for request in (structured(PROFILE_SCHEMA), chat(tools=TOOLS), chat()):
        assert SimLLM(seed=3).complete(request) == SimLLM(seed=3).complete(request)


def test_sim_seed_name_and_request_seed_each_change_the_answer() -> None:
    request = structured(PROFILE_SCHEMA)
    base = SimLLM(seed=1).complete(request)["choices"][0]["message"]["content"]
    for other in (
        SimLLM(seed=2).complete(request),
        SimLLM(name="other", seed=1).complete(request),
        SimLLM(seed=1).complete({**request, "seed": 99}),
    ):
        assert other["choices"][0]["message"]["content"] != base


def test_sampling_options_do_not_change_the_answer() -> None:
    sim = SimLLM()
    plain = sim.complete(structured(PROFILE_SCHEMA))
    tuned = sim.complete(structured(PROFILE_SCHEMA, temperature=1.3, model="another"))
    assert tuned["choices"] == plain["choices"]
    assert tuned["model"] == "another"


def test_json_schema_answers_are_valid_json_for_the_schema() -> None:
    sim = SimLLM()
    for i in range(50):
        response = sim.complete(structured(PROFILE_SCHEMA, seed=i))
        assert response["choices"][0]["finish_reason"] == "stop"
        jsonschema.validate(json.loads(response["choices"][0]["message"]["content"]), PROFILE_SCHEMA)


def test_json_object_answers_a_small_object() -> None:
    response = SimLLM().complete(chat(response_format={"type": "json_object"}))
    value = json.loads(response["choices"][0]["message"]["content"])
    assert isinstance(value, dict) and 1 <= len(value) <= 3


def test_tool_call_arguments_validate_against_the_tool_parameters() -> None:
    sim = SimLLM()
    by_name = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    called = set()
    for i in range(40):
        response = sim.complete(chat(f"turn {i}", tools=TOOLS))
        choice = response["choices"][0]
        assert choice["finish_reason"] == "tool_calls"
        assert choice["message"]["content"] is None
        (call,) = choice["message"]["tool_calls"]
        assert call["type"] == "function" and call["id"].startswith("call_")
        name = call["function"]["name"]
        jsonschema.validate(json.loads(call["function"]["arguments"]), by_name[name])
        called.add(name)
    assert called == set(by_name)


def test_tool_choice_naming_a_function_is_respected() -> None:
    choice = {"type": "function", "function": {"name": "say"}}
    for i in range(10):
        message = SimLLM().complete(chat(f"turn {i}", tools=TOOLS, tool_choice=choice))["choices"][0]["message"]
        assert message["tool_calls"][0]["function"]["name"] == "say"


def test_tool_choice_none_answers_with_text() -> None:
    message = SimLLM().complete(chat(tools=TOOLS, tool_choice="none"))["choices"][0]["message"]
    assert isinstance(message["content"], str) and "tool_calls" not in message


def test_text_answers_are_a_sentence_or_two() -> None:
    response = SimLLM().complete(chat())
    content = response["choices"][0]["message"]["content"]
    assert content.endswith(".") and 1 <= content.count(".") <= 2
    assert response["object"] == "chat.completion" and response["id"].startswith("chatcmpl-")


def test_max_tokens_truncates_text_with_finish_reason_length() -> None:
    choice = SimLLM().complete(chat(max_tokens=2))["choices"][0]
    assert choice["finish_reason"] == "length" and len(choice["message"]["content"]) <= 8


def test_usage_counts_about_four_characters_per_token() -> None:
    prompt = "x" * 41
    response = SimLLM().complete(chat(prompt))
    usage = response["usage"]
    assert usage["prompt_tokens"] == math.ceil(41 / 4)
    assert usage["completion_tokens"] == math.ceil(len(response["choices"][0]["message"]["content"]) / 4)
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]


@pytest.mark.parametrize(
    ("extra", "kind"),
    [
        ({}, "text"),
        ({"response_format": {"type": "text"}}, "text"),
        ({"response_format": {"type": "json_object"}}, "json_object"),
        ({"response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {}}}}, "json_schema"),
        ({"tools": TOOLS}, "tools"),
        ({"tools": TOOLS, "tool_choice": "none"}, "text"),
        ({"tools": [], "tool_choice": "auto"}, "text"),
        ({"tools": TOOLS, "response_format": {"type": "json_object"}}, "json_object"),
        ({"tools": TOOLS, "tool_choice": "required", "response_format": {"type": "json_object"}}, "tools"),
    ],
)
def test_request_kind(extra: dict[str, Any], kind: str) -> None:
    assert request_kind(chat(**extra)) == kind


@pytest.mark.parametrize(
    ("request_body", "message"),
    [
        ({"model": "m"}, "messages"),
        ({"messages": [{"content": "hi"}]}, "role"),
        (chat(response_format={"type": "yaml"}), "response_format"),
        (chat(tools=[{"type": "function"}]), "tools"),
        (chat(tools=TOOLS, tool_choice={"type": "function", "function": {"name": "fly"}}), "fly"),
        (structured({"type": "string", "pattern": "^a"}), "pattern"),
        (chat(stream=True), "stream"),
        (chat(n=3), "'n'"),
    ],
)
def test_invalid_requests_raise_value_error(request_body: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SimLLM().complete(request_body)


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b, strict=True))


def test_embeddings_are_deterministic_unit_vectors() -> None:
    texts = ["the quiet river", "", "market prices rose"]
    vectors = SimLLM().embed(texts, dim=32)
    assert vectors == SimLLM().embed(texts, dim=32)
    assert all(len(v) == 32 and math.isclose(math.sqrt(cosine(v, v)), 1.0) for v in vectors)


def test_similar_texts_embed_closer_than_unrelated_ones() -> None:
    a, b, c = SimLLM().embed(
        [
            "the farmers market sells fresh apples and pears",
            "fresh apples and pears at the farmers market",
            "quantum chromodynamics lattice simulation results",
        ]
    )
    assert cosine(a, b) > 0.8  # seven of eight words shared
    assert cosine(a, b) > cosine(a, c) + 0.3


def test_a_served_model_and_fingerprint_replace_what_replies_name_and_nothing_else() -> None:
    request = {"model": "asked-for", "messages": [{"role": "user", "content": "hi"}]}
    plain, served = SimLLM(seed=4).complete(request), SimLLM(seed=4, served_model="snap-1", fingerprint="fp_1").complete(request)

    assert (plain["model"], plain["system_fingerprint"]) == ("asked-for", "sim-4")
    assert (served["model"], served["system_fingerprint"]) == ("snap-1", "fp_1")
    assert served["choices"] == plain["choices"]
