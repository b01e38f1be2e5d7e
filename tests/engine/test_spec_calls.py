"""An intervene step's env tool calls are checked against the spec's modules when the spec is read."""

from __future__ import annotations

import pytest

from engine.errors import SpecError
from engine.spec import parse_spec
from engine.spec_calls import describe_calls, resolve_env_calls

BASE = {"name": "x", "agents": [{"id": i} for i in range(5)], "environment": {"modules": [{"type": "SocialMediaSpace"}]}}


def spec_with(intervene: dict) -> dict:
    return {**BASE, "steps": [{"type": "run", "num_steps": 1}, {"type": "intervene", **intervene}]}


@pytest.mark.parametrize(("intervene", "path", "says"), [
    ({"calls": [{"tool": "remove_top_node", "arguments": {"share": 0.5}}]}, "steps.1.calls.0.tool",
     "no env tool 'remove_top_node' in the spec's modules (did you mean 'remove_top_nodes'?)"),
    ({"calls": [{"tool": "remove_top_nodes", "arguments": {"share": 2}}]}, "steps.1.calls.0.arguments.share",
     "remove_top_nodes: Input should be less than or equal to 1"),
    ({"calls": [{"tool": "seed_post", "arguments": {"text": "hi", "at": "centre"}}]}, "steps.1.calls.0.arguments.at",
     "seed_post: Input should be 'random', 'degree' or 'group'"),
    ({"calls": [{"tool": "remove_follows", "arguments": {"nodes": [1], "agent_id": 3}}]}, "steps.1.calls.0.arguments.agent_id",
     "agent_id is the experimenter's"),
    ({}, "steps.1.intervene", "takes an 'instruction' (for the helper) or 'calls' (env tools), one of them"),
    ({"instruction": "cut the hubs", "calls": [{"tool": "remove_follows", "arguments": {"nodes": [1]}}]}, "steps.1.intervene",
     "one of them"),
])
def test_a_call_that_cannot_be_is_refused_at_its_field(intervene: dict, path: str, says: str) -> None:
    with pytest.raises(SpecError) as caught:
        parse_spec(spec_with(intervene))
    assert caught.value.path == path and says in str(caught.value), (caught.value.path, str(caught.value))


def test_calls_are_sent_with_the_experimenters_agent_id_where_the_tool_takes_one() -> None:
    spec = parse_spec(spec_with({"calls": [{"tool": "remove_top_nodes", "arguments": {"share": 0.2}},
                                           {"tool": "social_statistics"}]}))
    calls = spec.steps[1].calls
    assert resolve_env_calls(calls, ["SocialMediaSpace"]) == [
        ("remove_top_nodes", {"share": 0.2, "agent_id": -1}), ("social_statistics", {})]
    assert describe_calls(calls) == "remove_top_nodes(share=0.2); social_statistics()"
