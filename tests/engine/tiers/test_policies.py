"""engine.tiers.policies and the shipped policies (the opinion models: test_opinion_dynamics.py); the tier fields of a population spec."""

from __future__ import annotations

import random

import pytest

from engine.errors import SpecError
from engine.spec import QuestionnaireStep, parse_spec
from engine.tiers.examples import bounded_confidence, feed_posts, social_poster
from engine.tiers.policies import POLICIES, Act, Observation, register_policy, resolve_policy

FEED = """Your feed (default, 3 of 3 posts):
#3 by agent 5 at 2024-01-01 10:00: On the issue: opinion=0.450 [0 likes, 0 comments, 0 reposts]
#2 agent 6 reposted #1 by agent 9 at 2024-01-01 09:00 ("On the issue: opinion=0.900") [1 likes, 0 comments, 0 reposts] (you like it)
#1 by agent 9 at 2024-01-01 09:00: On the issue: opinion=0.900 [1 likes, 0 comments, 0 reposts]"""


def test_feed_posts_reads_post_ids_and_authors() -> None:
    assert [(p, a) for p, a, _ in feed_posts(FEED)] == [(3, 5), (2, 6), (1, 9)]


def test_bounded_confidence_moves_only_toward_opinions_within_epsilon() -> None:
    state = {"opinion": 0.5}
    acts = bounded_confidence(Observation(1, 2, FEED, params={"epsilon": 0.2, "mu": 0.5}), state, random.Random(0))
    assert state["opinion"] == pytest.approx(0.475)  # it met 0.45, within 0.2 (the other post, 0.9, is not)
    assert (state["heard"], state["moved"]) == (2, 1)  # #2 is a repost of #1: one post
    assert acts == [Act("create_post", {"text": "On the issue: opinion=0.475"})]
    first: dict = {}
    bounded_confidence(Observation(1, 1, "", profile={"opinion": 0.8}), first, random.Random(0))
    assert first["opinion"] == 0.8  # the profile's opinion to start from
    quiet: dict = {}
    assert bounded_confidence(Observation(1, 1, "", params={"post_probability": 0}), quiet, random.Random(0)) == []
    assert 0 <= quiet["opinion"] <= 1


def test_social_poster_likes_what_it_has_not_liked_and_counts_its_acts() -> None:
    state: dict = {}
    params = {"like_probability": 1, "repost_probability": 1, "follow_probability": 1, "post_probability": 1}
    acts = social_poster(Observation(5, 1, FEED, params=params), state, random.Random(1))
    tools = [a.tool for a in acts]
    assert tools == ["like_post", "repost", "follow", "create_post"]
    assert acts[0].arguments == {"post_id": 2} or acts[0].arguments == {"post_id": 1}  # never its own post #3 (agent 5)
    assert acts[0].arguments["post_id"] != 2  # #2 is liked already
    assert acts[2].arguments["target_agent_id"] in {6, 9} and state["counts"]["like_post"] == 1 and state["liked"] == [1]
    again = social_poster(Observation(5, 2, FEED, params=params), state, random.Random(2))
    assert "like_post" not in [a.tool for a in again]  # nothing left it has not liked


def test_a_policy_is_registered_like_an_agent_class() -> None:
    def shout(observation: Observation, state: dict, rng: random.Random) -> list[Act]:
        return [Act("create_post", {"text": "HEY"})]

    register_policy(shout)
    try:
        assert resolve_policy("shout") is shout and "shout" in POLICIES.names()
        spec = parse_spec({"name": "s", "population": [{"count": 2, "tier": "rule", "rule": {"policy": "shout"}}],
                           "steps": [{"type": "run", "num_steps": 1}]})
        assert spec.population[0].rule.policy == "shout"
        with pytest.raises(SpecError, match="takes no key 'loud'") as caught:
            parse_spec({"name": "s", "population": [{"count": 2, "tier": "rule", "rule": {"policy": "shout", "params": {"loud": 1}}}],
                        "steps": [{"type": "run", "num_steps": 1}]})
        assert caught.value.path == "population.0.rule.params.loud"
    finally:
        POLICIES.unregister("shout")


def population_error(population: dict) -> SpecError:
    with pytest.raises(SpecError) as caught:
        parse_spec({"name": "s", "population": [{"count": 4, **population}], "steps": [{"type": "run", "num_steps": 1}]})
    return caught.value


ARCH = {"options": [{"name": "idle"}]}


def test_an_archetype_key_naming_an_unknown_field_is_refused_at_its_path() -> None:
    error = population_error({"profile_template": {"party": ["a", "b"]}, "tier": "archetype", "archetype": {**ARCH, "key": ["party", "partyy"]}})
    assert error.path == "population.0.archetype.key.1" and "did you mean 'party'?" in str(error)
    table = population_error({"rows": [{"region": "n"}] * 4, "tier": "archetype", "archetype": {**ARCH, "key": ["age"]}})
    assert table.path == "population.0.archetype.key.0" and "its fields: region" in str(table)


def test_tier_settings_must_match_the_tier() -> None:
    assert "tier archetype needs 'archetype'" in str(population_error({"tier": "archetype"}))
    assert "'rule' is for tier rule" in str(population_error({"rule": {"policy": "social_poster"}}))
    error = population_error({"tier": "rule", "rule": {"policy": "social_poster", "params": {"like_probability": 2}}})
    assert error.path == "population.0.rule.params.like_probability"
    assert population_error({"tier": "rule", "rule": {"policy": "social_postr"}}).path == "population.0.rule.policy"
    twice = population_error({"tier": "archetype", "archetype": {"options": [{"name": "a"}, {"name": "a"}]}})
    assert "two options are named 'a'" in str(twice)
    bad = population_error({"tier": "archetype", "archetype": {"options": [{"name": "a", "tool": "t", "arguments": {"x": "{nope}"}}]}})
    assert "arguments.x" in str(bad)


def test_a_questionnaire_naming_a_tier_member_or_no_agent_is_refused_at_the_targets_path() -> None:
    def refused(targets: list[int]) -> SpecError:
        with pytest.raises(SpecError) as caught:
            parse_spec({"name": "s", "seed": 2, "population": [
                {"count": 2}, {"count": 4, "tier": "rule", "rule": {"policy": "social_poster"}},
                {"count": 10, "tier_mix": {"llm": 0.5, "archetype": 0.5}, "archetype": {"options": [{"name": "idle"}]}}],
                "steps": [{"type": "run", "num_steps": 1},
                          {"type": "questionnaire", "questionnaire_id": "q", "target_agent_ids": targets,
                           "questions": [{"id": "a", "prompt": "Trust?", "response_type": "integer"}]}]})
        return caught.value

    rule = refused([0, 1, 3])
    assert rule.path == "steps.1.target_agent_ids.2" and "agent 3 is a rule member of population 1" in str(rule)
    assert "asks LLM agents only" in str(rule)
    assert "there is no agent 16" in str(refused([16])) and refused([16]).path == "steps.1.target_agent_ids.0"
    spec = parse_spec({"name": "s", "seed": 2, "population": [
        {"count": 10, "tier_mix": {"llm": 0.5, "archetype": 0.5}, "archetype": {"options": [{"name": "idle"}]}}],
        "steps": [{"type": "run", "num_steps": 1}]})
    tiers = spec.population[0].member_tiers(spec.seed, 0)
    llm, archetype = tiers.index("llm"), tiers.index("archetype")

    def question(target: int) -> QuestionnaireStep:
        return QuestionnaireStep.model_validate({"questionnaire_id": "q", "target_agent_ids": [target],
                                                 "questions": [{"id": "a", "prompt": "Trust?", "response_type": "integer"}]})

    assert spec.questionnaire_target_problem([question(llm)]) is None  # a mix's LLM members answer
    assert spec.questionnaire_target_problem([question(archetype)]) == (
        "steps.0.target_agent_ids.0", f"agent {archetype} is an archetype member of population 0; a questionnaire asks LLM "
        "agents only (tier llm)")
