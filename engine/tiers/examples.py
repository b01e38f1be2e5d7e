"""Three rule policies that ship with Polis, all for :class:`~engine.env.modules.social_media.SocialMediaSpace`.

- :func:`bounded_confidence`: the bounded-confidence model of Deffuant, Neau, Amblard and Weisbuch (2000). Its
  opinion is a number in [0, 1]. Each tick it meets one post drawn (with its seeded rng) from the posts in its feed
  it has not seen yet, and when that post's opinion ``y`` is closer than ``epsilon`` to its own ``x`` it moves:
  ``x += mu * (y - x)``. Then it posts its own (``opinion=0.42``).
- :func:`hegselmann_krause`: the bounded-confidence model of Hegselmann and Krause (2002). Each tick its opinion
  becomes the mean of its own and of every opinion within ``epsilon`` among the posts in its feed it has not seen
  yet (one per author, the newest), so the feed is its neighbourhood. Then it posts its own.
- :func:`social_poster`: a rule-based user. With set probabilities it likes, reposts and follows from its feed, and
  posts a line from its templates.

A post's opinion is its author's: a repost carries the opinion and the author of the post it reposts (the quoted
text), never the reposter's, and counts as that post (seen once, whichever of the two shows up first). A member
keeps the ids of the opinion posts it has seen in its state: the newest :data:`SEEN_KEEP` of them, and below those
a floor (``seen_below``) under which every post counts as seen. New posts get ever larger ids, so the floor only
hides an old post the member never saw (an old post that a feed brings up again, or an old post reposted), and only
once it has seen :data:`SEEN_KEEP` newer ones.

In Deffuant's model a pair meets and both move. In a feed the encounter is one-sided per tick: the reader moves
toward the author's post; the author moves toward the reader only when it draws the reader's post from its own feed,
at another tick or never (it may not be shown it). So each member makes at most one update per tick (Deffuant's
pairwise steps make two per encounter), and the mean opinion is not conserved the way the symmetric update conserves
it. The Hegselmann–Krause update is synchronous because every member of a tick reads the same posts, the opinions
the others posted at earlier ticks, and posts its new opinion only after it has read them.
"""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from engine.format_template import check_format_template
from engine.tiers.policies import Act, Observation, read_params, rule_policy

__all__ = ["SEEN_KEEP", "BoundedConfidence", "FeedOpinion", "HegselmannKrause", "SocialPoster", "bounded_confidence",
           "feed_opinions", "feed_posts", "hegselmann_krause", "social_poster"]

_POST = re.compile(r"#(\d+) (?:by agent (\d+)|agent (\d+) reposted)")
# SocialMediaSpace renders a repost as: #3 agent 6 reposted #1 by agent 9 at 2024-01-01 09:00 ("original text"): comment
_REPOST = re.compile(r'#\d+ agent \d+ reposted #(\d+) by agent (\d+) at \d{4}-\d\d-\d\d \d\d:\d\d \("(.*?)"\)')
_OPINION = re.compile(r"opinion=(-?\d+(?:\.\d+)?)")
_KEEP = 50
SEEN_KEEP = 100  #: how many seen opinion-post ids a member keeps above its ``seen_below`` floor


def feed_posts(text: str) -> list[tuple[int, int, str]]:
    """``(post id, author, line)`` of each post line of a SocialMediaSpace feed, in feed order.

    A repost's line gives the repost's id and the reposter (what a like, a repost or a follow acts on); see
    :func:`feed_opinions` for the opinion it carries."""
    found = []
    for line in text.splitlines():
        match = _POST.match(line.strip())
        if match:
            found.append((int(match[1]), int(match[2] or match[3]), line))
    return found


@dataclass(frozen=True)
class FeedOpinion:
    """An opinion a feed shows: the post that states it and that post's author (a repost's original and its author)."""

    post_id: int  #: the post that states the opinion: a repost's original
    author: int  #: that post's author, not the reposter
    opinion: float  #: clipped to [0, 1]


def feed_opinions(text: str) -> list[FeedOpinion]:
    """The opinions (``opinion=0.42``) a SocialMediaSpace feed shows, in feed order.

    A repost carries the opinion of the post it reposts, attributed to that post and its author; a reposter's own
    comment is not read."""
    found = []
    for post, author, line in feed_posts(text):
        repost = _REPOST.match(line.strip())
        post_id, author, said = (int(repost[1]), int(repost[2]), repost[3]) if repost else (post, author, line)
        match = _OPINION.search(said)
        if match is not None:
            found.append(FeedOpinion(post_id, author, min(1.0, max(0.0, float(match[1])))))
    return found


class _OpinionParams(BaseModel):
    """The parameters both opinion models share."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    epsilon: float = Field(0.2, gt=0, le=1, description="the confidence bound: how close an opinion must be to count")
    opinion_field: str = Field("opinion", description="the profile field with its first opinion (none: drawn uniformly)")
    topic: str = Field("the issue", max_length=200, description="what the posts are about")
    post_probability: float = Field(1.0, ge=0, le=1, description="the chance it posts its opinion each tick")


class BoundedConfidence(_OpinionParams):
    """``rule.params`` of :func:`bounded_confidence` (an opinion exactly ``epsilon`` away does not count, as in Deffuant et al.)."""

    mu: float = Field(0.3, gt=0, le=0.5, description="the convergence parameter: the share of the gap it moves by")


class HegselmannKrause(_OpinionParams):
    """``rule.params`` of :func:`hegselmann_krause` (``epsilon`` counts an opinion at exactly that distance)."""


def _read_feed(p: _OpinionParams, observation: Observation, state: dict[str, Any], rng: random.Random) -> tuple[float, list[FeedOpinion]]:
    """The member's opinion and the opinions of others it has not seen before, by post id; marks them seen."""
    if "opinion" not in state:
        first = observation.profile.get(p.opinion_field)
        state["opinion"] = min(1.0, max(0.0, float(first))) if isinstance(first, int | float) else rng.random()
    seen, floor = set(state.get("seen", [])), int(state.get("seen_below", 0))
    fresh: dict[int, FeedOpinion] = {}
    for item in feed_opinions(observation.text):
        if item.author != observation.agent_id and item.post_id > floor and item.post_id not in seen:
            fresh.setdefault(item.post_id, item)
    kept = sorted(seen | fresh.keys())
    if len(kept) > SEEN_KEEP:
        floor, kept = kept[-SEEN_KEEP - 1], kept[-SEEN_KEEP:]
    state.update(seen=kept, seen_below=floor)
    return float(state["opinion"]), [fresh[post] for post in sorted(fresh)]


def _post(p: _OpinionParams, x: float, rng: random.Random) -> list[Act]:
    if rng.random() >= p.post_probability:
        return []
    return [Act("create_post", {"text": f"On {p.topic}: opinion={x:.3f}"})]


@rule_policy(BoundedConfidence)
def bounded_confidence(observation: Observation, state: dict[str, Any], rng: random.Random) -> list[Act]:
    """Meet one unseen post, move toward it if it is within ``epsilon``, then post (see the module docstring)."""
    p = read_params(BoundedConfidence, observation)
    x, fresh = _read_feed(p, observation, state, rng)
    moved = 0
    if fresh:  # drawn from the posts sorted by id, so the draw depends on the set and the seed, not the feed's order
        y = fresh[rng.randrange(len(fresh))].opinion
        if abs(y - x) < p.epsilon:
            x, moved = x + p.mu * (y - x), 1
    state.update(opinion=round(x, 6), heard=len(fresh), moved=moved)
    return _post(p, state["opinion"], rng)


@rule_policy(HegselmannKrause)
def hegselmann_krause(observation: Observation, state: dict[str, Any], rng: random.Random) -> list[Act]:
    """Take the mean of its own and the unseen opinions within ``epsilon``, then post (see the module docstring)."""
    p = read_params(HegselmannKrause, observation)
    x, fresh = _read_feed(p, observation, state, rng)
    newest = {item.author: item.opinion for item in fresh}  # by post id, so an author's newest post wins
    near = [y for _, y in sorted(newest.items()) if abs(y - x) <= p.epsilon]
    x = math.fsum([x, *near]) / (1 + len(near))  # fsum: the same mean in any order
    state.update(opinion=round(x, 6), heard=len(newest), moved=len(near))
    return _post(p, state["opinion"], rng)


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
