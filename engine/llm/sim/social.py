"""The social simulated LLM (``sim/social``): agents that post, repost, like, comment, follow and unfollow at set rates.

The default simulated model picks among the ``ask_env`` examples, which name no social media tool, so an offline
run of a social platform showed agents reading their feeds and nothing else. ``sim/social`` answers an agent's
step decision (``AgentDecision``) whose observation holds a SocialMediaSpace feed by drawing one action at the
spec's rates, aimed at what the feed shows: repost, like or comment on a post in it, follow or unfollow its
authors (follows also reach the author of a reposted original, so the graph can grow), or write a post. The
decision is one ``ask_env`` instruction that names the tool ("repost #12", "like post #12", "follow agent 7") and
ends the step; the router then maps it like any instruction (the CodeGen router's template cache makes that one
call per kind of action). With no action drawn, the agent finishes the step. Every other request, and a step
whose prompt shows no feed, is answered as ``sim/default`` answers it, so the schema-validity guarantees hold.

The draw is a function of the request and the sim's seed, so a rerun acts the same. Rates are set in the spec:
``llm: {default: {model: sim/social, extra: {social: {repost: 0.4, like: 0.2}}}}`` (probabilities per agent
step, at most 1 in all; those left out keep their defaults, :data:`DEFAULT_RATES`).
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any

from engine.llm.sim.schema_instance import generate_instance
from engine.llm.sim.vocabulary import WORDS
from engine.llm_spec import DEFAULT_SOCIAL_RATES as DEFAULT_RATES
from engine.llm_spec import social_rates

__all__ = ["DEFAULT_RATES", "SOCIAL", "SocialRates", "social_decision", "social_rates"]

#: The simulated model's name that acts socially (``sim/social``).
SOCIAL = "social"
SocialRates = dict[str, float]

#: A feed line: "#12 by agent 3 at ..." or "#14 agent 5 reposted #12 by agent 3 at ...".
_FEED_LINE = re.compile(r"^#(\d+) (?:by agent (\d+)|agent (\d+) reposted #\d+ by agent (\d+))", re.MULTILINE)
_FEED_HEADER = "Your feed ("
#: The decision an agent's step makes (``AgentBase.decision_model``).
_DECISION = "AgentDecision"


def _last_user_text(messages: list[Mapping[str, Any]]) -> str:
    last = next((m for m in reversed(messages) if m.get("role") == "user"), None)
    content = last.get("content") if last is not None else None
    return content if isinstance(content, str) else ""


def _branches(schema: Mapping[str, Any]) -> set[str]:
    action = schema.get("properties", {}).get("action", {})
    mapping = action.get("discriminator", {}).get("mapping", {})
    return set(mapping) if isinstance(mapping, Mapping) else set()


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 9))).capitalize()


def social_decision(request: Mapping[str, Any], rng: random.Random, rates: SocialRates) -> dict[str, Any] | None:
    """The decision of an agent's step on a social platform, or None to answer as ``sim/default`` does."""
    fmt = request.get("response_format") or {}
    spec = fmt.get("json_schema") or {}
    schema = spec.get("schema") or {}
    if spec.get("name") != _DECISION or not {"ask_env", "finish"} <= _branches(schema):
        return None
    observed = _last_user_text(request["messages"])
    if _FEED_HEADER not in observed and "Your feed is empty" not in observed:
        return None
    posts, authors, reached = [], [], []
    for match in _FEED_LINE.finditer(observed):
        posts.append(int(match.group(1)))
        authors.append(int(match.group(2) or match.group(3)))
        if match.group(4):
            reached.append(int(match.group(4)))
    draw, edge = rng.random(), 0.0
    action = None
    for name, rate in rates.items():
        edge += rate
        if draw < edge:
            action = name
            break
    instruction = None
    if action == "post":
        instruction = f"create a post saying '{_text(rng)}'"
    elif action in ("repost", "like", "comment") and not posts:
        instruction = None  # nothing in the feed to act on: the agent only reads
    elif action == "repost":
        instruction = f"repost #{rng.choice(posts)}"
    elif action == "like":
        instruction = f"like post #{rng.choice(posts)}"
    elif action == "comment":
        instruction = f"comment on post #{rng.choice(posts)} saying '{_text(rng)}'"
    elif action == "follow" and (authors or reached):
        instruction = f"follow agent {rng.choice(reached or authors)}"
    elif action == "unfollow" and authors:
        instruction = f"unfollow agent {rng.choice(authors)}"
    if instruction is None:
        finish_ref = schema["properties"]["action"]["discriminator"]["mapping"]["finish"]
        finish = generate_instance({"$ref": finish_ref, "$defs": schema.get("$defs", {})}, rng)
        finish["arguments"]["summary"] = "I read my feed."
        return {"thought": "Nothing here I want to act on.", "action": finish, "finish": True}
    return {"thought": f"I will {instruction.split(' ')[0]}.", "action": {"tool": "ask_env", "arguments": {"instruction": instruction}},
            "finish": True}
