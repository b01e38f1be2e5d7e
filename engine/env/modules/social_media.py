"""SocialMediaSpace: posts, comments, likes, reposts and follows, with a ranked feed and search.

Updates are synchronous, as in MessagingSpace: everything an agent does during a tick is queued
and applied when the tick's env step runs, in (agent id, call order) order. Post ids are handed out
then, so they do not depend on how agents were batched, and every read during a tick (feeds,
search, posts) sees the start-of-tick platform. An intervention settled between ticks publishes
its updates at once; the next step reports them.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import re
from datetime import datetime
from typing import Annotated, Any, Literal

import numpy as np
from pydantic import Field

from engine.env.base import EXPERIMENTER_ID, EnvBase
from engine.env.modules.social_datasets import SOCIAL_ACTIONS, SOCIAL_CASCADES, SOCIAL_STATE
from engine.env.modules.social_interventions import SocialInterventions
from engine.env.tool import tool
from engine.env.update_queue import Update
from engine.errors import SpecError
from engine.network.cascades import cascade_stats
from engine.network.datasets import NETWORK_EDGES, NETWORK_MEASURES
from engine.network.graph import Graph
from engine.network.measures import graph_measures
from engine.storage.catalog import DatasetSchema

__all__ = ["SocialMediaSpace"]

_ALGORITHMS = ("chronological", "engagement")
#: ``my_profile`` lists the first this many agents followed, then says how many more (a hub follows thousands).
PROFILE_IDS = 20
#: ``suggest_follows`` looks through the follows of the first this many agents one follows.
SUGGEST_FROM = 200
_TOKEN = re.compile(r"\w+")


def _tokens(text: str) -> set[str]:
    return {token.lower() for token in _TOKEN.findall(text)}


class SocialMediaSpace(SocialInterventions, EnvBase):
    """A social media platform: agents post, comment, like, repost, follow each other, read a feed and search posts.

    What an agent does here is published at the end of the current step; until then everyone sees
    the platform as it was when the step began. The feed shows other agents' posts, either
    ``chronological`` (newest posts of the agents you follow) or ``engagement`` (recent posts ranked by
    likes, comments and reposts, fading with age, and boosted when you follow the author). On a
    platform started without follows, a chronological feed of someone who follows nobody shows
    everyone's posts; with a follow network it is empty.

    Args:
        feed_algorithm: the default feed ranking, ``chronological`` or ``engagement``.
        feed_limit: how many posts a feed shows.
        max_length: longest post or comment accepted, in characters.
        engagement_half_life_hours: post age at which its engagement score halves.
        follow_boost: score added in the engagement feed to posts by agents you follow.
        engagement_window: the engagement feed ranks the newest this many posts (and the newest posts of
            those you follow), so a feed costs the same however long the run.
        follows: initial follows: agent id -> agent ids it follows, or a network layer
            (``network: {follows: <layer>}``; an undirected layer's edges count both ways).
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
        engagement_window: int = 1000,
        follows: dict[int, list[int]] | Graph | None = None,
        groups: dict[int, Any] | None = None,
    ) -> None:
        super().__init__()
        if feed_algorithm not in _ALGORITHMS:
            raise SpecError(f"feed_algorithm must be one of {', '.join(_ALGORITHMS)}, not {feed_algorithm!r}")
        if feed_limit < 1 or max_length < 1 or engagement_half_life_hours <= 0 or engagement_window < 1:
            raise SpecError("feed_limit, max_length, engagement_window and engagement_half_life_hours must be positive")
        self._algorithm: str = feed_algorithm
        self._feed_limit = feed_limit
        self._max_length = max_length
        self._half_life = engagement_half_life_hours
        self._follow_boost = follow_boost
        self._window = engagement_window
        self._groups = {int(agent): value for agent, value in (groups or {}).items()}
        self._open_feed = follows is None
        self._graph = follows if isinstance(follows, Graph) else Graph.from_adjacency(follows or {})
        self._posts: dict[int, dict[str, Any]] = {}
        self._heads: dict[int, str] = {}  #: each rendered post's unchanging head, by post id
        self._by_author: dict[int, list[int]] = {}  #: author -> post ids, ascending
        self._children: dict[int, list[int]] = {}  #: post -> the reposts made from it
        self._comments_total = 0
        self._applied_last: list[dict[str, Any]] = []
        self._applied_unreported: list[dict[str, Any]] = []  #: applied since the last step (by apply_pending)
        self._edges_last: list[list[Any]] = []  #: [change, source, target] applied in the last step
        self._edges_unreported: list[list[Any]] = []
        self._removed: set[int] = set()  #: agents an experimenter removed (their follows gone); later choices skip them
        self._silenced: set[int] = set()  #: removed agents that may no longer act here

    def bind_agents(self, agent_ids: list[int]) -> None:
        super().bind_agents(agent_ids)
        missing = np.setdiff1d(np.asarray(agent_ids, dtype=np.int64), self._graph.nodes)
        if missing.size and not self._graph.changed:  # every agent a node, so centrality ranks them all
            source, target = self._graph.edges()
            self._graph = Graph(source, target, np.union1d(self._graph.nodes, missing), layer=self._graph.layer)

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
        if agent_id in self._silenced:
            raise ValueError(f"agent {agent_id} was removed from the platform by the experimenter and cannot {kind} here")
        self.updates.queue(agent_id, kind=kind, post_id=post_id, target=target, text=text)

    def _own_pending(self, agent_id: int, kind: str) -> list[Update]:
        return [u for u in self.updates.of(agent_id) if u["kind"] == kind]

    def _following_after_own_ops(self, agent_id: int) -> set[int]:
        # An agent's own queued follows/unfollows count for its later calls in the same step.
        following = set(self._graph.successors(agent_id))
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
        if _likes(post, agent_id) or any(op["post_id"] == post_id for op in self._own_pending(agent_id, "like")):
            return f"you already like post #{post_id}"
        self._queue("like", agent_id, post_id=post_id)
        return f"like of post #{post_id} queued"

    @tool(readonly=False)
    def repost(self, agent_id: int, post_id: int, comment: str = "") -> str:
        """Share post #post_id with your followers, optionally with a comment; published at the end of this step."""
        self.check_agent(agent_id)
        root = self._check_post(post_id)["repost_of"]  # a repost of a repost shares the original, through it
        self._queue("repost", agent_id, post_id=post_id, text=self._check_text(comment, allow_empty=True))
        return f"repost of post #{post_id} queued" if root is None else f"repost of post #{root} (through #{post_id}) queued"

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
        following = self._graph.successors(agent_id)
        followers = self._graph.predecessors(agent_id)
        own = self._by_author.get(agent_id, [])
        shown = ", ".join(map(str, following[:PROFILE_IDS])) + (f" and {len(following) - PROFILE_IDS} more" if len(following) > PROFILE_IDS else "")
        return (
            f"You follow {len(following)} agents" + (f" ({shown})" if len(following) else "")
            + f"; {len(followers)} agents follow you; you have published {len(own)} posts"
            + (f" (latest #{own[-1]})" if own else "") + "."
        )

    @tool(readonly=True)
    def suggest_follows(self, agent_id: int, limit: Annotated[int, Field(ge=1, le=50)] = 5) -> str:
        """Suggest agents to follow: those the agents agent_id follows follow most, that agent_id does not follow yet."""
        following = self._graph.successors(agent_id)
        counts: dict[int, int] = {}
        for followee in following[:SUGGEST_FROM]:
            for candidate in self._graph.successors(followee):
                counts[candidate] = counts.get(candidate, 0) + 1
        mine = set(following) | {agent_id}
        ranked = heapq.nsmallest(limit, ((-n, c) for c, n in counts.items() if c not in mine))
        if not ranked:
            return "No suggestions: follow someone first." if not following else "No suggestions: you follow all they follow."
        return "Suggested: " + ", ".join(f"agent {c} (followed by {-n} you follow)" for n, c in ranked) + "."

    @tool(readonly=True, kind="statistics")
    def social_statistics(self) -> str:
        """Platform totals: posts, reposts, comments, likes and follows."""
        totals = self._totals()
        return (
            f"{totals['posts_total']} posts ({totals['reposts_total']} reposts), {totals['comments_total']} comments, "
            f"{totals['likes_total']} likes, {totals['follows_total']} follows"
        )

    def _newest_of(self, authors: list[int], limit: int) -> tuple[list[int], int]:
        """The ``limit`` newest post ids by ``authors``, newest first, and how many they have in all."""
        rows = [self._by_author.get(a, ()) for a in authors]
        return heapq.nlargest(limit, (i for row in rows for i in row[-limit:])), sum(map(len, rows))

    def _feed(self, viewer: int, algorithm: str, limit: int) -> str:
        following = self._graph.successors(viewer)
        note = ""
        if algorithm == "chronological":
            if following:
                ids, total = self._newest_of(following, limit)
            elif self._open_feed:
                note = " (you follow nobody yet, so it shows everyone's posts)"
                total = len(self._posts) - len(self._by_author.get(viewer, ()))
                newest = (i for i in range(len(self._posts), 0, -1) if self._posts[i]["author"] != viewer)
                ids = list(itertools.islice(newest, limit))  # the newest few, not a pass over every post
            else:
                return "Your feed is empty: you follow nobody."
        else:
            recent = range(len(self._posts), max(0, len(self._posts) - self._window), -1)
            candidates = {*recent, *self._newest_of(following, limit)[0]}
            pool = [self._posts[i] for i in candidates if self._posts[i]["author"] != viewer]
            followed = set(following)
            ranked = sorted(pool, key=lambda p: (-self._score(p, followed), -p["id"]))
            ids, total = [p["id"] for p in ranked[:limit]], len(pool)
        if not ids:
            return "Your feed is empty."
        header = f"Your feed ({algorithm}, {len(ids)} of {total} posts){note}:"
        return header + "\n" + "\n".join(self._render(self._posts[i], viewer) for i in ids)

    def _score(self, post: dict[str, Any], following: set[int]) -> float:
        engagement = 1.0 + len(post["likes"]) + 2 * len(post["comments"]) + 3 * len(post["reposts"])
        engagement += self._follow_boost if post["author"] in following else 0.0
        age_hours = max(0.0, (self.t - post["t"]).total_seconds() / 3600) if self.t is not None else 0.0
        return engagement * 0.5 ** (age_hours / self._half_life)

    def _head(self, post: dict[str, Any]) -> str:
        """What a post shows that never changes once it is published (kept: a feed renders it for every viewer)."""
        head = self._heads.get(post["id"])
        if head is None:
            when = post["t"].strftime("%Y-%m-%d %H:%M")
            if post["repost_of"] is None:
                head = f"#{post['id']} by agent {post['author']} at {when}: {post['text']}"
            else:
                original = self._posts[post["repost_of"]]
                head = f"#{post['id']} agent {post['author']} reposted #{original['id']} by agent {original['author']} at {when}"
                head += f' ("{original["text"]}")' + (f": {post['text']}" if post["text"] else "")
            self._heads[post["id"]] = head
        return head

    def _render(self, post: dict[str, Any], viewer: int) -> str:
        head = self._head(post)
        liked = " (you like it)" if _likes(post, viewer) else ""
        return f"{head} [{len(post['likes'])} likes, {len(post['comments'])} comments, {len(post['reposts'])} reposts]{liked}"

    # ---- the step ----------------------------------------------------------------------------
    async def step(self, tick: int, t: datetime) -> None:
        self.t = t
        self.apply_pending()
        self._applied_last, self._applied_unreported = self._applied_unreported, []
        self._edges_last, self._edges_unreported = self._edges_unreported, []

    def apply_update(self, update: Update) -> None:
        """Publish one queued action at ``self.t`` (new posts get their ids now); the next step reports it."""
        assert self.t is not None, "updates are applied after init"
        if update["kind"] == "edges":
            self._apply_edges(update)
        elif update["kind"] == "seeded":
            for author in update["authors"]:
                self._publish(author, update["text"], None, self.t, intervention=True)
        elif update["kind"] == "feed_rule":
            self._algorithm = update["text"]
            self._applied_unreported.append(self._event("feed_rule", EXPERIMENTER_ID, text=update["text"], intervention=True))
        else:
            event = self._apply(update, self.t)
            if event is not None:
                self._applied_unreported.append(event)

    @staticmethod
    def _event(kind: str, agent: int, *, post_id: int | None = None, ref: int | None = None, target: int | None = None,
               text: str | None = None, parent: int | None = None, intervention: bool = False) -> dict[str, Any]:
        return {"kind": kind, "agent_id": agent, "post_id": post_id, "ref_post_id": ref, "target_agent_id": target,
                "text": text, "parent_post_id": parent, "intervention": intervention}

    def _publish(self, agent: int, text: str, parent: int | None, t: datetime, *, intervention: bool = False) -> None:
        new_id = len(self._posts) + 1  # posts are never deleted
        root = None if parent is None else (self._posts[parent]["repost_of"] or parent)
        self._posts[new_id] = {"id": new_id, "author": agent, "text": text, "t": t, "repost_of": root, "via": parent,
                               "likes": [], "comments": [], "reposts": []}
        self._by_author.setdefault(agent, []).append(new_id)
        if parent is not None:
            assert root is not None
            self._posts[root]["reposts"].append(new_id)
            self._children.setdefault(parent, []).append(new_id)
        kind = "post" if parent is None else "repost"
        self._applied_unreported.append(
            self._event(kind, agent, post_id=new_id, ref=root, text=text, parent=parent, intervention=intervention))

    def _change_edge(self, change: str, source: int, target: int) -> bool:
        changed = (self._graph.add_edge if change == "added" else self._graph.remove_edge)(source, target)
        if changed:
            self._edges_unreported.append([change, source, target])
        return changed

    def _apply_edges(self, update: Update) -> None:
        nodes = update.get("removed_nodes") or []
        self._removed.update(nodes)
        if update.get("silence"):
            self._silenced.update(nodes)
        for change, kind, pairs in (("removed", "unfollow", update["removed"]), ("added", "follow", update["added"])):
            for u, v in pairs:
                if self._change_edge(change, u, v):
                    self._applied_unreported.append(self._event(kind, u, target=v, intervention=True))

    def _apply(self, op: Update, t: datetime) -> dict[str, Any] | None:
        kind, agent = op["kind"], op.agent_id
        if kind in ("post", "repost"):
            self._publish(agent, op["text"], op["post_id"] if kind == "repost" else None, t)
            return None
        if kind == "comment":
            self._posts[op["post_id"]]["comments"].append({"agent_id": agent, "text": op["text"], "t": t})
            self._comments_total += 1
        elif kind == "like":
            likes = self._posts[op["post_id"]]["likes"]  # ascending: a popular post has tens of thousands
            at = bisect.bisect_left(likes, agent)
            if at < len(likes) and likes[at] == agent:
                return None
            likes.insert(at, agent)
        else:
            self._change_edge("added" if kind == "follow" else "removed", agent, op["target"])
        return self._event(kind, agent, post_id=op["post_id"], target=op["target"], text=op["text"])

    # ---- replay and persistence --------------------------------------------------------------
    def _totals(self) -> dict[str, int]:
        return {
            "posts_total": len(self._posts),
            "reposts_total": sum(1 for p in self._posts.values() if p["repost_of"] is not None),
            "comments_total": self._comments_total,
            "likes_total": sum(len(p["likes"]) for p in self._posts.values()),
            "follows_total": self._graph.edge_count,
        }

    def metrics(self) -> dict[str, float]:
        kinds = [a["kind"] for a in self._applied_last if not a["intervention"]]
        values = {name: float(kinds.count(kind)) for name, kind in (
            ("posts", "post"), ("reposts", "repost"), ("comments", "comment"), ("likes", "like"), ("follows", "follow"),
            ("unfollows", "unfollow"))}
        values["active_agents"] = float(len({a["agent_id"] for a in self._applied_last if not a["intervention"]}))
        if self._posts:  # before the first post there is no ratio
            values["likes_per_post"] = sum(len(p["likes"]) for p in self._posts.values()) / len(self._posts)
        return values

    @classmethod
    def replay_datasets(cls) -> list[DatasetSchema]:
        return [SOCIAL_STATE, SOCIAL_ACTIONS, SOCIAL_CASCADES, NETWORK_EDGES, NETWORK_MEASURES]

    def _cascade_rows(self, step: int, t: datetime) -> list[dict[str, Any]]:
        roots = sorted({a["post_id"] if a["kind"] == "post" else a["ref_post_id"]
                        for a in self._applied_last if a["kind"] in ("post", "repost")})
        rows = []
        for root in roots:
            stats = cascade_stats(root, self._children)
            rows.append({"step": step, "t": t, "root_post_id": root, "author_id": self._posts[root]["author"],
                         "size": stats.size, "depth": stats.depth, "max_breadth": stats.max_breadth,
                         "structural_virality": stats.structural_virality})
        return rows

    def replay_rows(self, step: int, t: datetime) -> dict[str, list[dict[str, Any]]]:
        active = {a["agent_id"] for a in self._applied_last if not a["intervention"]}
        state = {"step": step, "t": t, "actions": len(self._applied_last), "active_agents": len(active), **self._totals()}
        actions = [{"step": step, "t": t, **a} for a in self._applied_last]
        rows = {SOCIAL_STATE.name: [state], SOCIAL_ACTIONS.name: actions, SOCIAL_CASCADES.name: self._cascade_rows(step, t)}
        if self._graph.layer is not None:
            if self._edges_last:
                rows[NETWORK_EDGES.name] = [
                {"layer": self._graph.layer, "step": step, "change": change, "source": u, "target": v, "directed": True,
                     "weight": None, "type": None} for change, u, v in self._edges_last]
            measures = graph_measures(self._graph, groups=self._groups or None)
            rows[NETWORK_MEASURES.name] = [{"layer": self._graph.layer, "step": step, "t": t, **measures}]
        return rows

    def dump_state(self) -> dict[str, Any]:
        posts = [{**p, "t": p["t"].isoformat(), "comments": [{**c, "t": c["t"].isoformat()} for c in p["comments"]]}
                 for p in self._posts.values()]
        return {"posts": posts, "follow_changes": self._graph.changes(), "feed_algorithm": self._algorithm,
                "comments_total": self._comments_total, "applied_last": self._applied_last,
                "applied_unreported": self._applied_unreported, "edges_last": self._edges_last,
                "edges_unreported": self._edges_unreported, "removed": sorted(self._removed),
                "silenced": sorted(self._silenced)}

    def load_state(self, state: dict[str, Any]) -> None:
        self._posts = {
            p["id"]: {"via": p["repost_of"], **p, "t": datetime.fromisoformat(p["t"]),
                      "comments": [{**c, "t": datetime.fromisoformat(c["t"])} for c in p["comments"]]}
            for p in state["posts"]
        }
        self._heads = {}
        self._by_author, self._children = {}, {}
        for post in self._posts.values():
            self._by_author.setdefault(post["author"], []).append(post["id"])
            if post["via"] is not None:
                self._children.setdefault(post["via"], []).append(post["id"])
        changes = state.get("follow_changes")
        if changes is None:  # saved by an engine that kept the whole follow graph: its difference from the base
            saved = {(int(k), int(v)) for k, vs in state["follows"].items() for v in vs}
            base = set(zip(*(side.tolist() for side in self._graph.with_changes({}).edges()), strict=True))
            changes = {"added": sorted(saved - base), "removed": sorted(base - saved)}
        self._graph = self._graph.with_changes(changes)
        self._algorithm = state.get("feed_algorithm", self._algorithm)
        self._comments_total = state["comments_total"]
        legacy = {"parent_post_id": None, "intervention": False}
        self._applied_last = [{**legacy, **a} for a in state["applied_last"]]
        self._applied_unreported = [{**legacy, **a} for a in state.get("applied_unreported", [])]
        self._edges_last = list(state.get("edges_last", []))
        self._edges_unreported = list(state.get("edges_unreported", []))
        self._removed = {int(node) for node in state.get("removed", [])}
        self._silenced = {int(node) for node in state.get("silenced", [])}


def _likes(post: dict[str, Any], agent_id: int) -> bool:
    """``agent_id`` likes ``post`` (its likes are kept ascending: a search, not a scan)."""
    likes = post["likes"]
    at = bisect.bisect_left(likes, agent_id)
    return at < len(likes) and likes[at] == agent_id
