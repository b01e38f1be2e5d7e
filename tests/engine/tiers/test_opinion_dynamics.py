"""bounded_confidence is Deffuant–Weisbuch and hegselmann_krause is Hegselmann–Krause, each checked against a plain
numpy simulation of the same model: opinions posted with three decimals, a feed of the others' posts of the last
tick (complete mixing), the member's opinion kept to six decimals."""

from __future__ import annotations

import random
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pytest

from engine.env.modules.social_media import SocialMediaSpace
from engine.tiers.examples import SEEN_KEEP, FeedOpinion, bounded_confidence, feed_opinions, hegselmann_krause
from engine.tiers.policies import Act, Observation, Policy, resolve_policy

T0 = datetime(2024, 1, 1, 8, 0)


def post(post_id: int, author: int, opinion: float) -> str:
    """One post line as SocialMediaSpace renders it."""
    return f"#{post_id} by agent {author} at 2024-01-01 10:00: On the issue: opinion={opinion:.3f} [0 likes, 0 comments, 0 reposts]"


def feed(lines: Sequence[str]) -> str:
    return f"Your feed (default, {len(lines)} of {len(lines)} posts):\n" + "\n".join(lines)


def step(policy: Policy, text: str, state: dict[str, Any], seed: int = 0, me: int = 1, **params: Any) -> list[Act]:
    return policy(Observation(me, 2, text, params=params), state, random.Random(seed))


# ---- the examples --------------------------------------------------------------------------------------

def test_deffuant_meets_one_post_drawn_from_the_set_so_the_feeds_order_does_not_matter() -> None:
    lines = [post(1, 5, 0.50), post(2, 6, 0.56)]  # x=0.30, eps=0.25, mu=0.3: the old code gave 0.42, reversed 0.36
    outcomes = set()
    for seed in range(20):
        forward, backward = {"opinion": 0.3}, {"opinion": 0.3}
        step(bounded_confidence, feed(lines), forward, seed, epsilon=0.25, mu=0.3)
        step(bounded_confidence, feed(lines[::-1]), backward, seed, epsilon=0.25, mu=0.3)
        assert forward["opinion"] == backward["opinion"]
        outcomes.add(forward["opinion"])
    assert outcomes == {0.36, 0.3}  # it met 0.50 (within 0.25: moves 0.3 of the gap) or 0.56 (too far: stays)


def test_hegselmann_krause_takes_the_mean_within_epsilon_in_any_order() -> None:
    lines = [post(1, 5, 0.50), post(2, 6, 0.56), post(3, 7, 0.05)]
    forward, backward = {"opinion": 0.3}, {"opinion": 0.3}
    step(hegselmann_krause, feed(lines), forward, epsilon=0.25)
    step(hegselmann_krause, feed(lines[::-1]), backward, epsilon=0.25)
    assert forward["opinion"] == backward["opinion"] == pytest.approx((0.3 + 0.5 + 0.05) / 3, abs=1e-6)  # 0.56 is 0.26 away
    assert (forward["heard"], forward["moved"]) == (3, 2)
    edge: dict[str, Any] = {"opinion": 0.3}
    step(hegselmann_krause, feed([post(1, 5, 0.5)]), edge, epsilon=0.2)
    assert edge["opinion"] == pytest.approx(0.4)  # Hegselmann and Krause count an opinion at exactly epsilon


def test_five_posts_make_one_encounter_not_a_compounded_mu() -> None:
    lines = [post(i, 10 + i, 0.5) for i in range(1, 6)]  # the old code moved 1 - 0.7**5 = 0.83 of the gap
    state: dict[str, Any] = {"opinion": 0.4}
    step(bounded_confidence, feed(lines), state, epsilon=0.25, mu=0.3)
    assert state["opinion"] == pytest.approx(0.43) and (state["heard"], state["moved"]) == (5, 1)


@pytest.mark.parametrize(("policy", "params", "moved_to"), [
    (bounded_confidence, {"epsilon": 0.25, "mu": 0.3}, 0.36), (hegselmann_krause, {"epsilon": 0.25}, 0.4)])
def test_a_post_already_seen_is_not_applied_again(policy: Policy, params: dict[str, Any], moved_to: float) -> None:
    state: dict[str, Any] = {"opinion": 0.3}
    for tick in range(3):  # the old code pulled it to 0.36, 0.402, 0.431: the same old post, geometrically
        step(policy, feed([post(1, 9, 0.5)]), state, seed=tick, **params)
        assert state["opinion"] == pytest.approx(moved_to)
        assert state["heard"] == (1 if tick == 0 else 0)
    step(policy, feed([post(1, 9, 0.5), post(2, 9, 0.6)]), state, **params)
    assert state["heard"] == 1 and state["opinion"] > moved_to  # the new post, alone


def test_the_seen_ids_are_bounded_and_older_ones_count_as_seen() -> None:
    state: dict[str, Any] = {"opinion": 0.5}
    step(hegselmann_krause, feed([post(i, 1000 + i, 0.5) for i in range(1, 151)]), state, me=1)
    assert state["seen"] == list(range(51, 151)) and len(state["seen"]) == SEEN_KEEP and state["seen_below"] == 50
    step(hegselmann_krause, feed([post(7, 3, 0.6), post(151, 4, 0.6)]), state, me=1)  # #7 is under the floor
    assert state["heard"] == 1 and state["opinion"] == pytest.approx(0.55)


async def test_a_repost_carries_its_original_authors_opinion() -> None:
    space = SocialMediaSpace()
    await space.init(T0)
    await space.call_tool("create_post", {"agent_id": 1, "text": "On the issue: opinion=0.300"})  # post #1
    await space.call_tool("create_post", {"agent_id": 9, "text": "On the issue: opinion=0.500"})  # post #2
    await space.step(3600, T0 + timedelta(hours=1))
    first = await space.call_tool("my_feed", {"agent_id": 2}, readonly=True)
    await space.call_tool("repost", {"agent_id": 6, "post_id": 2, "comment": "no: opinion=0.900"})  # post #3
    await space.call_tool("repost", {"agent_id": 7, "post_id": 1})  # post #4
    await space.step(3600, T0 + timedelta(hours=2))
    second = await space.call_tool("my_feed", {"agent_id": 2}, readonly=True)
    reposts = {int(line[1]): line for line in second.splitlines() if "reposted" in line}
    assert reposts[3].startswith('#3 agent 6 reposted #2 by agent 9') and reposts[4].startswith("#4 agent 7 reposted #1 by agent 1")
    assert feed_opinions(second) == [FeedOpinion(1, 1, 0.3), FeedOpinion(2, 9, 0.5), FeedOpinion(2, 9, 0.5), FeedOpinion(1, 1, 0.3)]

    mine: dict[str, Any] = {"opinion": 0.4}  # agent 1's own post #1, reposted by agent 7: not an encounter
    step(bounded_confidence, feed([reposts[4]]), mine, me=1, epsilon=0.25, mu=0.5)
    assert mine["opinion"] == 0.4 and mine["heard"] == 0  # the old code credited it to agent 7 and moved to 0.35
    state: dict[str, Any] = {"opinion": 0.4}
    step(bounded_confidence, first, state, me=2, epsilon=0.25, mu=0.5)
    met = state["opinion"]
    assert met in (0.35, 0.45)
    step(bounded_confidence, second, state, me=2, epsilon=0.25, mu=0.5)
    assert state["opinion"] == met and state["heard"] == 0  # the reposts are posts #1 and #2, seen already
    reader: dict[str, Any] = {"opinion": 0.4}  # agent 6 said 0.2 itself and reposted agent 9's 0.5: two authors
    step(hegselmann_krause, feed([post(5, 6, 0.2), reposts[3]]), reader, me=5, epsilon=0.25)
    assert reader["opinion"] == pytest.approx((0.4 + 0.2 + 0.5) / 3, abs=1e-6) and reader["heard"] == 2  # not 0.9, its comment


def test_hegselmann_krause_is_registered_with_its_params_checked() -> None:
    assert resolve_policy("hegselmann_krause") is hegselmann_krause
    assert hegselmann_krause.Config.model_fields.keys() == {"epsilon", "opinion_field", "topic", "post_probability"}
    acts = step(hegselmann_krause, "", {}, post_probability=1, topic="rent")
    assert acts[0].tool == "create_post" and acts[0].arguments["text"].startswith("On rent: opinion=")


# ---- against a numpy reference ---------------------------------------------------------------------------------

def posted(x: np.ndarray) -> np.ndarray:
    """What the others read: each opinion as a post prints it."""
    return np.array([float(f"{v:.3f}") for v in x])


def run_policy(policy: Policy, x0: np.ndarray, ticks: int, **params: Any) -> list[np.ndarray]:
    """Every member reads every other's post of the last tick (complete mixing) and posts each tick."""
    states: list[dict[str, Any]] = [{"opinion": float(v)} for v in x0]
    said, next_id, history = [f"{v:.3f}" for v in x0], 1, []
    for tick in range(1, ticks + 1):
        lines = [f"#{next_id + a} by agent {a} at 2024-01-01 10:00: On the issue: opinion={y} [0 likes, 0 comments, 0 reposts]"
                 for a, y in enumerate(said)]  # its own post too: the policy skips it
        next_id += len(said)
        text = feed(lines)
        for a, state in enumerate(states):
            acts = policy(Observation(a, tick, text, params={**params, "post_probability": 1}), state, random.Random(tick * 100_003 + a))
            said[a] = acts[0].arguments["text"].rsplit("=", 1)[1]
        history.append(np.array([s["opinion"] for s in states]))
    return history


def deffuant_reference(x0: np.ndarray, epsilon: float, mu: float, ticks: int, seed: int) -> list[np.ndarray]:
    """Deffuant et al. (2000), one-sided as in a feed: each agent meets one other, drawn uniformly, per tick."""
    rng, x, history = np.random.default_rng(seed), x0.copy(), []
    n = len(x)
    for _ in range(ticks):
        other = rng.integers(n - 1, size=n)
        other += other >= np.arange(n)
        gap = posted(x)[other] - x
        x = np.round(x + mu * gap * (np.abs(gap) < epsilon), 6)
        history.append(x)
    return history


def hegselmann_krause_reference(x0: np.ndarray, epsilon: float, ticks: int) -> list[np.ndarray]:
    """Hegselmann and Krause (2002): everyone at once takes the mean of the opinions within epsilon, its own included."""
    x, history = x0.copy(), []
    others = ~np.eye(len(x), dtype=bool)
    for _ in range(ticks):
        y = posted(x)
        near = (np.abs(y[None, :] - x[:, None]) <= epsilon) & others
        x = np.round((x + near @ y) / (1 + near.sum(axis=1)), 6)
        history.append(x)
    return history


def clusters(x: np.ndarray, gap: float = 0.01) -> int:
    return 1 + int((np.diff(np.sort(x)) > gap).sum())


def ticks_to(history: list[np.ndarray], spread: float) -> int | None:
    return next((t for t, x in enumerate(history, 1) if np.ptp(x) < spread), None)


def test_deffuant_with_epsilon_one_half_reaches_consensus_at_the_references_pace() -> None:
    x0 = np.random.default_rng(3).uniform(size=100)
    history = run_policy(bounded_confidence, x0, 30, epsilon=0.5, mu=0.5)
    assert np.ptp(history[-1]) < 0.01  # consensus
    reference = [ticks_to(deffuant_reference(np.random.default_rng(s).uniform(size=100), 0.5, 0.5, 40, s), 0.05)
                 for s in range(30)]
    paces = sorted(t for t in reference if t is not None)  # None: an extremist left beyond epsilon of the rest (1 seed in 30)
    assert len(paces) >= 27 and 10 <= paces[0] and paces[-1] <= 16
    pace = ticks_to(history, 0.05)
    assert pace is not None and paces[0] <= pace <= paces[-1]  # the old code, compounding its feed, took 3 ticks


def test_hegselmann_krause_matches_the_reference_and_leaves_about_one_cluster_per_two_epsilon() -> None:
    x0 = np.random.default_rng(7).uniform(size=100)
    history = run_policy(hegselmann_krause, x0, 15, epsilon=0.1)
    reference = hegselmann_krause_reference(x0, 0.1, 15)
    for tick, (ours, theirs) in enumerate(zip(history, reference, strict=True), 1):
        assert np.abs(ours - theirs).max() < 1e-3, tick
    assert np.abs(reference[-1] - reference[-2]).max() < 1e-3  # converged
    assert clusters(history[-1]) == clusters(reference[-1])
    assert abs(clusters(history[-1]) - 1 / (2 * 0.1)) <= 2  # uniform start: 3 to 5 at n=100 (mean 4 over 20 seeds)
