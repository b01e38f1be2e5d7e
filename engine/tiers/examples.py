"""Two rule policies that ship with Polis, both for :class:`~engine.env.modules.social_media.SocialMediaSpace`.

- :func:`bounded_confidence`: an opinion agent after Deffuant et al. (2000). Its opinion is a number in [0, 1]. Each
  tick it reads the opinions others posted in its feed (``opinion=0.42``), moves toward each one closer than
  ``epsilon`` by ``mu`` times the gap, and posts its own.
- :func:`social_poster`: a rule-based user. With set probabilities it likes, reposts and follows from its feed, and
  posts a line from its templates.
"""

from __future__ import annotations

import random
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine.format_template import check_format_template
from engine.tiers.policies import Act, Observation, read_params, rule_policy

__all__ = ["BoundedConfidence", "SocialPoster", "bounded_confidence", "feed_posts", "social_poster"]

_POST = re.compile(r"#(\d+) (?:by agent (\d+)|agent (\d+) reposted)")
_OPINION = re.compile(r"opinion=(-?\d+(?:\.\d+)?)")
_KEEP = 50


def feed_posts(text: str) -> list[tuple[int, int, str]]:
    """``(post id, author, line)`` of each post line of a SocialMediaSpace feed, in feed order."""
    found = []
    for line in text.splitlines():
        match = _POST.match(line.strip())
        if match:
            found.append((int(match[1]), int(match[2] or match[3]), line))
    return found


class BoundedConfidence(BaseModel):
    """``rule.params`` of :func:`bounded_confidence`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    epsilon: float = Field(0.2, gt=0, le=1, description="opinions closer than this move each other")
    mu: float = Field(0.3, gt=0, le=0.5, description="how far toward an opinion it moves: this share of the gap")
    opinion_field: str = Field("opinion", description="the profile field with its first opinion (none: drawn uniformly)")
    topic: str = Field("the issue", max_length=200, description="what the posts are about")
    post_probability: float = Field(1.0, ge=0, le=1, description="the chance it posts its opinion each tick")


@rule_policy(BoundedConfidence)
def bounded_confidence(observation: Observation, state: dict[str, Any], rng: random.Random) -> list[Act]:
    """Move toward the opinions within ``epsilon``, then post the own opinion (see the module docstring)."""
    p = read_params(BoundedConfidence, observation)
    if "opinion" not in state:
        first = observation.profile.get(p.opinion_field)
        state["opinion"] = min(1.0, max(0.0, float(first))) if isinstance(first, int | float) else rng.random()
    x = float(state["opinion"])
    heard = moved = 0
    for _, author, line in feed_posts(observation.text):
        match = _OPINION.search(line)
        if author == observation.agent_id or match is None:
            continue
        heard += 1
        y = min(1.0, max(0.0, float(match[1])))
        if abs(y - x) < p.epsilon:
            x += p.mu * (y - x)
            moved += 1
    state.update(opinion=round(x, 6), heard=heard, moved=moved)
    if rng.random() >= p.post_probability:
        return []
    return [Act("create_post", {"text": f"On {p.topic}: opinion={x:.3f}"})]


class SocialPoster(BaseModel):
    """``rule.params`` of :func:`social_poster`."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    post_probability: float = Field(0.2, ge=0, le=1)
    like_probability: float = Field(0.3, ge=0, le=1, description="the chance it likes the top post it has not liked")
    repost_probability: float = Field(0.05, ge=0, le=1, description="the chance it reposts the top post")
    follow_probability: float = Field(0.05, ge=0, le=1, description="the chance it follows an author in its feed")
    topic: str = Field("the news", max_length=200)
    templates: list[str] = Field(default_factory=lambda: ["What do you all think about {topic}?",
                                                          "Agent {id} here: {topic} matters."], min_length=1,
                                 description="post texts; {topic} and {id} are filled in")

    @field_validator("templates")
    @classmethod
    def _templates_bounded(cls, value: list[str]) -> list[str]:
        for template in value:
            check_format_template(template, ("topic", "id"))
        return value


@rule_policy(SocialPoster)
def social_poster(observation: Observation, state: dict[str, Any], rng: random.Random) -> list[Act]:
    """Like, repost and follow from the feed, and post, each with its probability (see the module docstring)."""
    p = read_params(SocialPoster, observation)
    me = observation.agent_id
    posts = [(post, author, line) for post, author, line in feed_posts(observation.text) if author != me]
    liked: list[int] = state.setdefault("liked", [])
    acts: list[Act] = []
    fresh = [post for post, _, line in posts if "(you like it)" not in line and post not in liked]
    if fresh and rng.random() < p.like_probability:
        acts.append(Act("like_post", {"post_id": fresh[0]}))
        state["liked"] = [*liked, fresh[0]][-_KEEP:]
    if posts and rng.random() < p.repost_probability:
        acts.append(Act("repost", {"post_id": posts[0][0]}))
    if posts and rng.random() < p.follow_probability:
        acts.append(Act("follow", {"target_agent_id": rng.choice(posts)[1]}))
    if rng.random() < p.post_probability:
        acts.append(Act("create_post", {"text": rng.choice(p.templates).format(topic=p.topic, id=me)}))
    counts = state.setdefault("counts", {})
    for act in acts:
        counts[act.tool] = counts.get(act.tool, 0) + 1
    return acts
