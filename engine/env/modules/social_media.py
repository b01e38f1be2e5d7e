"""SocialMediaSpace: posts, comments, likes, reposts and follows, with a ranked feed and search.

Updates are synchronous, as in MessagingSpace: everything an agent does during a tick is queued
and applied when the tick's env step runs, in (agent id, call order) order. Post ids are handed out
then, so they do not depend on how agents were batched, and every read during a tick (feeds,
search, posts) sees the start-of-tick platform. An intervention settled between ticks publishes
its updates at once; the next step reports them.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from engine.env.base import EnvBase
from engine.env.tool import tool
from engine.env.update_queue import Update
from engine.errors import SpecError
from engine.storage.catalog import Column, DatasetSchema

__all__ = ["SocialMediaSpace"]

FeedAlgorithm = Literal["chronological", "engagement"]
_ALGORITHMS = ("chronological", "engagement")
_TOKEN = re.compile(r"\w+")

_STATE = DatasetSchema(
    name="social_state",
    kind="env",
    description="SocialMediaSpace totals after each env step",
    columns=(
        Column(name="step", type="int64", description="society step (1-based) that just ended"),
        Column(name="t", type="timestamp", description="simulated time at the end of the step"),
        Column(name="actions", type="int64", description="actions applied in this step"),
        Column(name="active_agents", type="int64", description="distinct agents who acted in this step"),
        Column(name="posts_total", type="int64", description="posts published since the start, reposts included"),
        Column(name="reposts_total", type="int64", description="reposts published since the start"),
        Column(name="comments_total", type="int64", description="comments since the start"),
        Column(name="likes_total", type="int64", description="likes currently given"),
        Column(name="follows_total", type="int64", description="follow relations currently in place"),
    ),
)
_ACTIONS = DatasetSchema(
    name="social_actions",
    kind="env",
    description="every post, repost, comment, like, follow and unfollow, as applied",
    columns=(
        Column(name="step", type="int64", description="step in which it was applied"),
        Column(name="t", type="timestamp", description="simulated time at which it was applied"),
        Column(name="kind", type="string", description="post | repost | comment | like | follow | unfollow"),
        Column(name="agent_id", type="int64", description="acting agent"),
        Column(name="post_id", type="int64", description="new post (post, repost) or the post acted on (comment, like)"),
        Column(name="ref_post_id", type="int64", description="the reposted original (repost)"),
        Column(name="target_agent_id", type="int64", description="followed or unfollowed agent"),
        Column(name="text", type="string", description="post, repost or comment text"),
    ),
)


def _tokens(text: str) -> set[str]:
    return {token.lower() for token in _TOKEN.findall(text)}


class SocialMediaSpace(EnvBase):
    """A social media platform: agents post, comment, like, repost, follow each other, read a feed and search posts.

    What an agent does here is published at the end of the current step; until then everyone sees
    the platform as it was when the step began. The feed shows other agents' posts, either
    ``chronological`` (newest posts of the agents you follow; everyone's while you follow nobody) or
    ``engagement`` (all posts ranked by likes, comments and reposts, fading with age, and boosted
    when you follow the author).

    Args:
        feed_algorithm: the default feed ranking, ``chronological`` or ``engagement``.
        feed_limit: how many posts a feed shows.
        max_length: longest post or comment accepted, in characters.
        engagement_half_life_hours: post age at which its engagement score halves.
        follow_boost: score added in the engagement feed to posts by agents you follow.
        follows: initial follows, agent id -> agent ids it follows.
    """

    METRICS = {
        "posts": "posts published in this step, reposts not included",
        "reposts": "reposts published in this step",
        "comments": "comments made in this step",
        "likes": "likes given in this step",
        "follows": "follows made in this step",
        "unfollows": "unfollows made in this step",
        "active_agents": "distinct agents who acted in this step",
        "likes_per_post": "likes currently given divided by posts published since the start (reposts included)",
    }

    def __init__(
        self,
        feed_algorithm: str = "chronological",
        feed_limit: int = 10,
        max_length: int = 500,
        engagement_half_life_hours: float = 24.0,
        follow_boost: float = 5.0,
        follows: dict[int, list[int]] | None = None,
    ) -> None:
        super().__init__()
        if feed_algorithm not in _ALGORITHMS:
            raise SpecError(f"feed_algorithm must be one of {', '.join(_ALGORITHMS)}, not {feed_algorithm!r}")
        if feed_limit < 1 or max_length < 1 or engagement_half_life_hours <= 0:
            raise SpecError("feed_limit, max_length and engagement_half_life_hours must be positive")
        self._algorithm: str = feed_algorithm
        self._feed_limit = feed_limit
        self._max_length = max_length
        self._half_life = engagement_half_life_hours
        self._follow_boost = follow_boost
        self._follows: dict[int, list[int]] = {int(k): sorted({int(x) for x in v} - {int(k)}) for k, v in (follows or {}).items()}
        self._posts: dict[int, dict[str, Any]] = {}
        self._comments_total = 0
        self._applied_last: list[dict[str, Any]] = []
        self._applied_unreported: list[dict[str, Any]] = []  #: applied since the last step (by apply_pending)

    # ---- checks and queueing -----------------------------------------------------------------
    def _check_post(self, post_id: int) -> dict[str, Any]:
        post = self._posts.get(post_id)
        if post is None:
            raise ValueError(f"there is no post #{post_id} (new posts get their id at the end of the step)")
        return post

    def _check_text(self, text: str, *, allow_empty: bool = False) -> str:
        text = text.strip()
        if not text and not allow_empty:
            raise ValueError("an empty text cannot be published")
        if len(text) > self._max_length:
            raise ValueError(f"text longer than {self._max_length} characters")
        return text

    def _queue(self, kind: str, agent_id: int, post_id: int | None = None, target: int | None = None, text: str | None = None) -> None:
        self.updates.queue(agent_id, kind=kind, post_id=post_id, target=target, text=text)

    def _own_pending(self, agent_id: int, kind: str) -> list[Update]:
        return [u for u in self.updates.of(agent_id) if u["kind"] == kind]

    def _following_after_own_ops(self, agent_id: int) -> set[int]:
        # An agent's own queued follows/unfollows count for its later calls in the same step.
        following = set(self._follows.get(agent_id, []))
        for update in self.updates.of(agent_id):
            if update["kind"] in ("follow", "unfollow"):
                (following.add if update["kind"] == "follow" else following.discard)(update["target"])
        return following

    # ---- acting ------------------------------------------------------------------------------
    @tool(readonly=False)
    def create_post(self, agent_id: int, text: str) -> str:
        """Publish a post; it appears (with its id) at the end of this step."""
        self.check_agent(agent_id)
        self._queue("post", agent_id, text=self._check_text(text))
        return "post queued; it will be published at the end of this step"

    @tool(readonly=False)
    def comment(self, agent_id: int, post_id: int, text: str) -> str:
        """Comment on post #post_id; the comment appears at the end of this step."""
        self.check_agent(agent_id)
        self._check_post(post_id)
        self._queue("comment", agent_id, post_id=post_id, text=self._check_text(text))
        return f"comment on post #{post_id} queued"

    @tool(readonly=False)
    def like_post(self, agent_id: int, post_id: int) -> str:
        """Like post #post_id (once per post); counted at the end of this step."""
        self.check_agent(agent_id)
        post = self._check_post(post_id)
        if agent_id in post["likes"] or any(op["post_id"] == post_id for op in self._own_pending(agent_id, "like")):
            return f"you already like post #{post_id}"
        self._queue("like", agent_id, post_id=post_id)
        return f"like of post #{post_id} queued"

    @tool(readonly=False)
    def repost(self, agent_id: int, post_id: int, comment: str = "") -> str:
        """Share post #post_id with your followers, optionally with a comment; published at the end of this step."""
        self.check_agent(agent_id)
        original = self._check_post(post_id)
        original_id = original["repost_of"] or post_id  # reposting a repost shares the original
        self._queue("repost", agent_id, post_id=original_id, text=self._check_text(comment, allow_empty=True))
        return f"repost of post #{original_id} queued"

    @tool(readonly=False)
    def follow(self, agent_id: int, target_agent_id: int) -> str:
        """Follow another agent so their posts reach your chronological feed (from the next step)."""
        self.check_agent(agent_id)
        self.check_agent(target_agent_id)
        if target_agent_id == agent_id:
            raise ValueError("you cannot follow yourself")
        if target_agent_id in self._following_after_own_ops(agent_id):
            return f"you already follow agent {target_agent_id}"
        self._queue("follow", agent_id, target=target_agent_id)
        return f"you will follow agent {target_agent_id} from the next step"

    @tool(readonly=False)
    def unfollow(self, agent_id: int, target_agent_id: int) -> str:
        """Stop following an agent (from the next step)."""
        self.check_agent(agent_id)
        if target_agent_id not in self._following_after_own_ops(agent_id):
            return f"you do not follow agent {target_agent_id}"
        self._queue("unfollow", agent_id, target=target_agent_id)
        return f"you will stop following agent {target_agent_id} from the next step"

    # ---- reading -----------------------------------------------------------------------------
    @tool(readonly=True, kind="observe")
    def my_feed(self, agent_id: int) -> str:
        """Show agent_id's feed with the platform's default algorithm."""
        return self._feed(agent_id, self._algorithm, self._feed_limit)

    @tool(readonly=True)
    def view_feed(self, agent_id: int, algorithm: Literal["default", "chronological", "engagement"] = "default", limit: int = 0) -> str:
        """Show agent_id's feed with a chosen algorithm (chronological or engagement) and length (0: the default)."""
        if limit < 0:
            raise ValueError("limit cannot be negative")
        return self._feed(agent_id, self._algorithm if algorithm == "default" else algorithm, limit or self._feed_limit)

    @tool(readonly=True)
    def view_post(self, agent_id: int, post_id: int) -> str:
        """Show post #post_id with its comments."""
        post = self._check_post(post_id)
        lines = [self._render(post, agent_id)]
        lines += [f"  - agent {c['agent_id']}: {c['text']}" for c in post["comments"]] or ["  (no comments yet)"]
        return "\n".join(lines)

    @tool(readonly=True)
    def search_posts(self, agent_id: int, query: str, limit: int = 10) -> str:
        """Search posts by words; posts matching more of the query's words come first, then newer ones."""
        words = _tokens(query)
        if not words:
            raise ValueError("the search query has no words")
        if limit < 1:
            raise ValueError("limit must be at least 1")
        scored = [(len(words & _tokens(p["text"])), p) for p in self._posts.values()]
        hits = sorted(((n, p) for n, p in scored if n), key=lambda item: (-item[0], -item[1]["id"]))
        if not hits:
            return f"No post matches {query!r}."
        return f"{len(hits)} posts match {query!r}:\n" + "\n".join(self._render(p, agent_id) for _, p in hits[:limit])

    @tool(readonly=True)
    def my_profile(self, agent_id: int) -> str:
        """Show whom agent_id follows, how many follow it, and its own posts."""
        following = self._follows.get(agent_id, [])
        followers = sorted(a for a, targets in self._follows.items() if agent_id in targets)
        own = [p["id"] for p in self._posts.values() if p["author"] == agent_id]
        return (
            f"You follow {len(following)} agents" + (f" ({', '.join(map(str, following))})" if following else "")
            + f"; {len(followers)} agents follow you; you have published {len(own)} posts"
            + (f" (latest #{own[-1]})" if own else "") + "."
        )

    @tool(readonly=True, kind="statistics")
    def social_statistics(self) -> str:
        """Platform totals: posts, reposts, comments, likes and follows."""
        totals = self._totals()
        return (
            f"{totals['posts_total']} posts ({totals['reposts_total']} reposts), {totals['comments_total']} comments, "
            f"{totals['likes_total']} likes, {totals['follows_total']} follows"
        )

    def _feed(self, viewer: int, algorithm: str, limit: int) -> str:
        following = set(self._follows.get(viewer, []))
        candidates = [p for p in self._posts.values() if p["author"] != viewer]
        note = ""
        if algorithm == "chronological":
            if following:
                candidates = [p for p in candidates if p["author"] in following]
            else:
                note = " (you follow nobody yet, so it shows everyone's posts)"
            ranked = sorted(candidates, key=lambda p: -p["id"])
        else:
            ranked = sorted(candidates, key=lambda p: (-self._score(p, following), -p["id"]))
        if not ranked:
            return "Your feed is empty."
        shown = ranked[:limit]
        header = f"Your feed ({algorithm}, {len(shown)} of {len(ranked)} posts){note}:"
        return header + "\n" + "\n".join(self._render(p, viewer) for p in shown)

    def _score(self, post: dict[str, Any], following: set[int]) -> float:
        engagement = 1.0 + len(post["likes"]) + 2 * len(post["comments"]) + 3 * len(post["reposts"])
        engagement += self._follow_boost if post["author"] in following else 0.0
        age_hours = max(0.0, (self.t - post["t"]).total_seconds() / 3600) if self.t is not None else 0.0
        return engagement * 0.5 ** (age_hours / self._half_life)

    def _render(self, post: dict[str, Any], viewer: int) -> str:
        when = post["t"].strftime("%Y-%m-%d %H:%M")
        if post["repost_of"] is None:
            head = f"#{post['id']} by agent {post['author']} at {when}: {post['text']}"
        else:
            original = self._posts[post["repost_of"]]
            head = f"#{post['id']} agent {post['author']} reposted #{original['id']} by agent {original['author']} at {when}"
            head += f' ("{original["text"]}")' + (f": {post['text']}" if post["text"] else "")
        liked = " (you like it)" if viewer in post["likes"] else ""
        return f"{head} [{len(post['likes'])} likes, {len(post['comments'])} comments, {len(post['reposts'])} reposts]{liked}"

    # ---- the step ----------------------------------------------------------------------------
    async def step(self, tick: int, t: datetime) -> None:
        self.t = t
        self.apply_pending()
        self._applied_last, self._applied_unreported = self._applied_unreported, []

    def apply_update(self, update: Update) -> None:
        """Publish one queued action at ``self.t`` (new posts get their ids now); the next step reports it."""
        assert self.t is not None, "updates are applied after init"
        event = self._apply(update, self.t)
        if event is not None:
            self._applied_unreported.append(event)

    def _apply(self, op: Update, t: datetime) -> dict[str, Any] | None:
        kind, agent = op["kind"], op.agent_id
        event = {"kind": kind, "agent_id": agent, "post_id": op["post_id"], "ref_post_id": None,
                 "target_agent_id": op["target"], "text": op["text"]}
        if kind in ("post", "repost"):
            new_id = len(self._posts) + 1  # posts are never deleted
            repost_of = op["post_id"] if kind == "repost" else None
            self._posts[new_id] = {"id": new_id, "author": agent, "text": op["text"], "t": t,
                                   "repost_of": repost_of, "likes": [], "comments": [], "reposts": []}
            if repost_of is not None:
                self._posts[repost_of]["reposts"].append(new_id)
            event.update(post_id=new_id, ref_post_id=repost_of)
        elif kind == "comment":
            self._posts[op["post_id"]]["comments"].append({"agent_id": agent, "text": op["text"], "t": t})
            self._comments_total += 1
        elif kind == "like":
            likes = self._posts[op["post_id"]]["likes"]
            if agent in likes:
                return None
            likes.append(agent)
            likes.sort()
        else:
            following = set(self._follows.get(agent, []))
            (following.add if kind == "follow" else following.discard)(op["target"])
            self._follows[agent] = sorted(following)
        return event

    # ---- replay and persistence --------------------------------------------------------------
    def _totals(self) -> dict[str, int]:
        return {
            "posts_total": len(self._posts),
            "reposts_total": sum(1 for p in self._posts.values() if p["repost_of"] is not None),
            "comments_total": self._comments_total,
            "likes_total": sum(len(p["likes"]) for p in self._posts.values()),
            "follows_total": sum(len(v) for v in self._follows.values()),
        }

    def metrics(self) -> dict[str, float]:
        kinds = [a["kind"] for a in self._applied_last]
        values = {name: float(kinds.count(kind)) for name, kind in (
            ("posts", "post"), ("reposts", "repost"), ("comments", "comment"), ("likes", "like"), ("follows", "follow"),
            ("unfollows", "unfollow"))}
        values["active_agents"] = float(len({a["agent_id"] for a in self._applied_last}))
        if self._posts:  # before the first post there is no ratio
            values["likes_per_post"] = sum(len(p["likes"]) for p in self._posts.values()) / len(self._posts)
        return values

    @classmethod
    def replay_datasets(cls) -> list[DatasetSchema]:
        return [_STATE, _ACTIONS]

    def replay_rows(self, step: int, t: datetime) -> dict[str, list[dict[str, Any]]]:
        state = {"step": step, "t": t, "actions": len(self._applied_last),
                 "active_agents": len({a["agent_id"] for a in self._applied_last}), **self._totals()}
        actions = [{"step": step, "t": t, **a} for a in self._applied_last]
        return {_STATE.name: [state], _ACTIONS.name: actions}

    def dump_state(self) -> dict[str, Any]:
        posts = [{**p, "t": p["t"].isoformat(), "comments": [{**c, "t": c["t"].isoformat()} for c in p["comments"]]}
                 for p in self._posts.values()]
        return {"posts": posts, "follows": {str(k): v for k, v in self._follows.items()}, "comments_total": self._comments_total,
                "applied_last": self._applied_last, "applied_unreported": self._applied_unreported}

    def load_state(self, state: dict[str, Any]) -> None:
        self._posts = {
            p["id"]: {**p, "t": datetime.fromisoformat(p["t"]),
                      "comments": [{**c, "t": datetime.fromisoformat(c["t"])} for c in p["comments"]]}
            for p in state["posts"]
        }
        self._follows = {int(k): list(v) for k, v in state["follows"].items()}
        self._comments_total = state["comments_total"]
        self._applied_last = list(state["applied_last"])
        self._applied_unreported = list(state.get("applied_unreported", []))
