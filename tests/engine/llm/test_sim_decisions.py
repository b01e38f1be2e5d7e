"""The simulated LLM answers the spec's own decision models with valid JSON, deterministically."""

from __future__ import annotations

import random
from typing import Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, create_model

from engine.agent.tools import ASK_ENV, FINISH
from engine.env.modules.messaging import MessagingSpace
from engine.env.routers.decision import build_router_decision
from engine.env.tool import ToolInfo
from engine.llm.backends.sim_backend import SimChatModel
from engine.llm.decision import build_decision_model
from engine.llm.structured import response_format_for

_FIELD_TYPES = [
    (int, Field(ge=0, le=1000)), (float, Field(gt=-1.0, lt=1.0)), (str, Field(min_length=1, max_length=40)),
    (bool, ...), (Literal["low", "mid", "high"], ...), (list[str], Field(max_length=4)), (int | None, None),
    (dict[str, int], ...),
]


def _random_args_model(rng: random.Random, name: str) -> type[BaseModel]:
    fields = {}
    for i in range(rng.randint(0, 4)):
        annotation, default = rng.choice(_FIELD_TYPES)
        fields[f"f{i}"] = (annotation, default)
    return create_model(name, __config__=ConfigDict(extra="forbid"), **fields)


def _random_decision(rng: random.Random) -> type[BaseModel]:
    """A decision model as agents and routers build them, over a random tool set."""
    if rng.random() < 0.5:
        actions = {f"tool_{k}": _random_args_model(rng, f"A{k}") for k in range(rng.randint(1, 6))}
        actions[FINISH.name] = FINISH.args_model
        if rng.random() < 0.5:
            actions[ASK_ENV.name] = ASK_ENV.args_model
        return build_decision_model(f"D{rng.random():.6f}".replace(".", ""), actions, stop_field="finish", stop_help="end")
    tools = dict(rng.sample(sorted(MessagingSpace.tools().items()), rng.randint(1, len(MessagingSpace.tools()))))
    for k in range(rng.randint(0, 3)):
        model = _random_args_model(rng, f"R{k}")
        tools[f"extra_{k}"] = ToolInfo(f"extra_{k}", "X", False, None, "extra", model, False)
    return build_router_decision(tools)


async def test_sim_returns_schema_valid_json_for_1000_random_decision_schemas():
    rng = random.Random(1234)
    sim = SimChatModel("default", seed=5)
    for i in range(1000):
        decision = _random_decision(rng)
        result = await sim.complete([{"role": "user", "content": f"case {i}"}], response_format=response_format_for(decision))
        decision.model_validate_json(result.text)  # raises on any invalid answer
        assert result.input_tokens > 0 and result.output_tokens > 0


async def test_sim_is_deterministic_per_seed_and_varies_across_seeds():
    decision = build_decision_model(
        "Det", {"ask_env": ASK_ENV.args_model, "finish": FINISH.args_model}, stop_field="finish", stop_help="end"
    )
    messages = [{"role": "user", "content": "what now?"}]
    fmt = response_format_for(decision)
    a = [(await SimChatModel("m", seed=1).complete(messages, response_format=fmt)).text for _ in range(3)]
    b = [(await SimChatModel("m", seed=2).complete(messages, response_format=fmt)).text for _ in range(3)]
    assert len(set(a)) == 1
    assert a[0] != b[0]


@pytest.mark.parametrize("seed", [0, 1, 2])
async def test_sim_text_answers_without_schema(seed):
    result = await SimChatModel("m", seed=seed).complete([{"role": "user", "content": "hello"}])
    assert isinstance(result.text, str) and result.text.strip()
