"""sim/social: on a step that shows a feed, one action drawn at the spec's rates and aimed at the feed; anything
else answered as sim/default answers it; rates that cannot be are refused at their field."""

from __future__ import annotations

from collections import Counter

import pytest

from engine.agent.tools import ASK_ENV, FINISH
from engine.errors import SpecError
from engine.llm.decision import build_decision_model
from engine.llm.sim.model import SimLLM
from engine.llm.structured import response_format_for
from engine.spec import parse_spec

DECISION = build_decision_model("AgentDecision", {"ask_env": ASK_ENV.args_model, "finish": FINISH.args_model},
                                stop_field="finish", stop_help="end the step")
FEED = ("Your feed (chronological, 2 of 2 posts):\n"
        "#4 agent 7 reposted #2 by agent 9 at 2024-01-01 09:00 (\"hi\") [0 likes, 0 comments, 0 reposts]\n"
        "#3 by agent 5 at 2024-01-01 09:00: rain [0 likes, 0 comments, 0 reposts]")


def step_request(observation: str, who: int) -> dict:
    return {"model": "sim/social", "response_format": response_format_for(DECISION), "messages": [
        {"role": "system", "content": f"You are agent {who}."},
        {"role": "user", "content": f"A new period of 60 minutes begins. What you observe:\n{observation}"}]}


def decisions(sim: SimLLM, observation: str, n: int = 2000) -> list[dict]:
    replies = [sim.complete(step_request(observation, who)) for who in range(n)]
    return [DECISION.model_validate_json(r["choices"][0]["message"]["content"]).model_dump() for r in replies]


def kind(decision: dict) -> str:
    if decision["action"]["tool"] == "finish":
        return "read"
    return decision["action"]["arguments"]["instruction"].split(" ")[0]


def test_actions_come_at_the_rates_and_aim_at_the_feed() -> None:
    rates = {"post": 0.1, "repost": 0.4, "like": 0.2, "comment": 0.1, "follow": 0.1, "unfollow": 0.05}
    made = decisions(SimLLM("social", seed=3, social=rates), FEED)
    counts = Counter(map(kind, made))
    words = {"post": "create", "repost": "repost", "like": "like", "comment": "comment", "follow": "follow", "unfollow": "unfollow"}
    for action, rate in rates.items():  # 2000 draws: 4 standard deviations at most
        assert abs(counts[words[action]] / 2000 - rate) < 4 * (rate * (1 - rate) / 2000) ** 0.5, (action, counts)
    assert abs(counts["read"] / 2000 - 0.05) < 0.02
    instructions = {d["action"]["arguments"]["instruction"] for d in made if d["action"]["tool"] == "ask_env"}
    assert {i for i in instructions if i.startswith(("repost", "like", "comment"))} <= {
        "repost #4", "repost #3", "like post #4", "like post #3", *(i for i in instructions if i.startswith("comment on post #"))}
    assert {i for i in instructions if i.startswith("follow")} <= {"follow agent 9"}  # who reached it through a repost
    assert {i for i in instructions if i.startswith("unfollow")} <= {"unfollow agent 7", "unfollow agent 5"}
    assert all(d["finish"] for d in made)


def test_the_draw_is_seeded() -> None:
    one, two, other = (decisions(SimLLM("social", seed=s), FEED, 50) for s in (1, 1, 2))
    assert one == two != other


def test_an_empty_feed_gets_posts_or_reading_and_no_feed_gets_the_default_answer() -> None:
    empty = Counter(map(kind, decisions(SimLLM("social"), "Your feed is empty: you follow nobody.", 500)))
    assert set(empty) <= {"create", "read", "follow", "unfollow"} - {"follow", "unfollow"}
    # no feed in sight (an inbox, a question): the schema-driven answer sim/default gives, never a social action
    plain = decisions(SimLLM("social", seed=4), "Your inbox is empty.", 200)
    assert not {kind(d) for d in plain} & {"create", "repost", "like", "comment", "follow", "unfollow"}
    assert SimLLM("default").social is None


@pytest.mark.parametrize(("social", "says"), [
    ({"reposts": 0.1}, "no action 'reposts' (did you mean 'repost'?)"),
    ({"like": 1.5}, "extra.social.like: a rate is a probability in [0, 1], not 1.5"),
    ({"post": 0.5, "repost": 0.5}, "the rates sum to 1.32, past 1"),
    ([0.1], "extra.social must map actions"),
])
def test_rates_that_cannot_be_are_refused_at_the_client(social: object, says: str) -> None:
    spec = {"name": "x", "agents": [{"id": 1}], "steps": [{"type": "run", "num_steps": 1}],
            "llm": {"default": {"model": "sim/social", "extra": {"social": social}}}}
    with pytest.raises(SpecError) as caught:
        parse_spec(spec)
    assert caught.value.path == "llm.default" and says in str(caught.value), (caught.value.path, str(caught.value))
    with pytest.raises(SpecError, match="extra.social: sim/default does not read it"):  # never ignored where no model reads it
        parse_spec({**spec, "llm": {"default": {"model": "sim/default", "extra": {"social": social}}}})
