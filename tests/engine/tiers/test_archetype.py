"""engine.tiers.archetype: the group's context, its prompt layout, the answer's model and the members' draws."""

from __future__ import annotations

import random
from collections import Counter

import pytest
from pydantic import ValidationError

from engine.tiers.archetype import archetype_messages, decision_model, draw_option, group_context, option_act, probabilities
from engine.tiers.plan import ArchetypeGroup
from engine.tiers.spec import ArchetypeSpec

OPTIONS = [{"name": "post", "tool": "create_post", "arguments": {"text": "{text} (agent {agent_id})"}, "description": "post it"},
           {"name": "like", "tool": "like_post", "arguments": {"post_id": 1}}, {"name": "idle"}]


def spec(**kw: object) -> ArchetypeSpec:
    return ArchetypeSpec(options=OPTIONS, **kw)  # type: ignore[arg-type]


def test_common_counts_the_lines_most_members_saw() -> None:
    seen = ["a\nb", "a\nc", "a\nb", "d"]
    text = group_context(spec(observations="common", observation_count=2), seen, random.Random(0))
    assert text.splitlines() == ["- (3 of 4 members) a", "- (2 of 4 members) b"]


def test_sample_shows_a_seeded_sample_with_duplicates_counted() -> None:
    seen = ["same"] * 8 + ["odd one"] * 2
    first = group_context(spec(observation_count=5), seen, random.Random(4))
    assert first == group_context(spec(observation_count=5), seen, random.Random(4))
    lines = first.splitlines()
    assert sum(1 + int(line.split("(and ")[1].split()[0]) if "(and " in line else 1 for line in lines) == 5
    long = group_context(spec(observation_count=1, observation_chars=50), ["x" * 500], random.Random(0))
    assert long == "- member 1: " + "x" * 50
    assert group_context(spec(), [], random.Random(0)) == "(nothing)"


def test_the_prompt_puts_what_never_changes_first() -> None:
    group = ArchetypeGroup("0.3", {"party": "red"}, (1, 2, 3))
    one = archetype_messages(spec(instruction="Decide."), group, step=1, context="- member 1: hello")
    two = archetype_messages(spec(instruction="Decide."), group, step=2, context="- member 1: bye")
    assert one[0] == two[0] and one[0]["role"] == "system"  # the whole system prompt repeats tick to tick
    assert "- party: red" in one[0]["content"] and "- post: post it" in one[0]["content"] and "group of 3" in one[0]["content"]
    assert "Step 1" in one[1]["content"] and "hello" in one[1]["content"]


def test_the_answer_needs_a_probability_per_option_and_one_above_zero() -> None:
    model = decision_model(spec())
    good = model.model_validate({"thought": "t", "probabilities": {"post": 0.2, "like": 0.2, "idle": 0.4}, "text": "hi"})
    assert probabilities(spec(), good) == pytest.approx({"post": 0.25, "like": 0.25, "idle": 0.5})
    with pytest.raises(ValidationError, match="every probability is 0"):
        model.model_validate({"thought": "t", "probabilities": {"post": 0, "like": 0, "idle": 0}, "text": "hi"})
    with pytest.raises(ValidationError):
        model.model_validate({"thought": "t", "probabilities": {"post": 0.5, "like": 0.5}, "text": "hi"})
    with pytest.raises(ValidationError):
        model.model_validate({"thought": "t", "probabilities": {"post": 1.5, "like": 0, "idle": 0}, "text": "hi"})
    quiet = ArchetypeSpec(options=[{"name": "idle"}, {"name": "wave", "tool": "wave"}])
    assert "text" not in decision_model(quiet).model_fields  # no option writes text: none is asked for


def test_members_draw_by_the_probabilities_and_act_on_their_option() -> None:
    odds = {"post": 0.2, "like": 0.0, "idle": 0.8}
    drawn = Counter(draw_option(spec(), odds, random.Random(i)).name for i in range(4000))
    assert drawn["like"] == 0 and 0.17 < drawn["post"] / 4000 < 0.23
    post, like, idle = spec().options
    assert option_act(post, agent_id=7, text="Hello").arguments == {"text": "Hello (agent 7)"}
    assert option_act(like, agent_id=7, text="x").arguments == {"post_id": 1}
    assert option_act(idle, agent_id=7, text="x") is None
