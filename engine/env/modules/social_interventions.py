"""SocialMediaSpace's experimenter tools: removing agents' follows (by list or by centrality), rewiring follows,
seeding posts and changing the feed rule, each queued and settled at the next step.

Removed agents are remembered (in the module's saved state): later choices of agents (``seed_post``, a second
``remove_top_nodes``) skip them, those an earlier call of the same intervention removed included, unless a call
says ``include_removed``; a removal with ``silence`` also stops the agents acting on the platform.
"""

from __future__ import annotations

import math
import random
from typing import TYPE_CHECKING, Annotated, Any, Literal

import numpy as np
from pydantic import Field

from engine.env.base import EXPERIMENTER_ID
from engine.env.tool import tool

if TYPE_CHECKING:
    from engine.env.update_queue import UpdateQueue
    from engine.network.graph import Graph

__all__ = ["Centrality", "FeedAlgorithm", "Fraction", "Share", "SocialInterventions"]

FeedAlgorithm = Literal["chronological", "engagement"]
#: What an intervention's node choice ranks by.
Centrality = Literal["degree", "in_degree", "out_degree"]
Share = Annotated[float, Field(gt=0, le=1)]
Fraction = Annotated[float, Field(ge=0, le=1)]


class SocialInterventions:
    """The experimenter's tools of :class:`~engine.env.modules.social_media.SocialMediaSpace` (a mixin of it)."""

    _graph: Graph
    _groups: dict[int, Any]
    _removed: set[int]  #: agents an experimenter removed (their follows gone)
    _silenced: set[int]  #: removed agents that may no longer act
    updates: UpdateQueue

    if TYPE_CHECKING:
        def check_agent(self, agent_id: int) -> None: ...
        def _check_text(self, text: str, *, allow_empty: bool = False) -> str: ...

    def _check_experimenter(self, agent_id: int) -> None:
        if agent_id != EXPERIMENTER_ID:
            raise ValueError("only the experimenter can change the network, seed posts or the feed rule")

    def _incident(self, nodes: list[int]) -> list[list[int]]:
        pairs = {(u, v) for node in nodes for u, v in (
            *((node, v) for v in self._graph.successors(node)), *((u, node) for u in self._graph.predecessors(node)))}
        return [list(pair) for pair in sorted(pairs)]

    def _ranked(self, by: str, *, include_removed: bool = False) -> list[int]:
        """Every node (but those removed, unless ``include_removed``), the highest ``by`` first (ties: the lower id)."""
        out, into = self._graph.degrees()
        score = {"degree": out + into, "in_degree": into, "out_degree": out}[by]
        return self._still_there(self._graph.nodes[np.lexsort((self._graph.nodes, -score))].tolist(), include_removed)

    def _still_there(self, nodes: list[int], include_removed: bool) -> list[int]:
        """``nodes`` but those removed (unless ``include_removed``), in their order."""
        if include_removed:
            return nodes
        removed = self._removed_by_now()
        return [node for node in nodes if node not in removed]

    def _removed_by_now(self) -> set[int]:
        """The agents removed, and those an earlier call of this step queued for removal (the same intervention's)."""
        queued = (u.get("removed_nodes") or [] for u in self.updates.of(EXPERIMENTER_ID) if u["kind"] == "edges")
        return self._removed.union(*queued)

    def _remove_nodes(self, agent_id: int, nodes: list[int], silence: bool) -> list[list[int]]:
        removed = self._incident(nodes)
        self.updates.queue(agent_id, kind="edges", removed=removed, added=[], removed_nodes=nodes, silence=silence)
        return removed

    @tool(readonly=False, experimenter=True)
    def remove_follows(self, agent_id: int, nodes: list[int], silence: bool = False) -> str:
        """Experimenter only: remove every follow to and from the given agents (from the next step); with ``silence``
        they can no longer post, repost, comment, like or follow here either. Later choices of agents (``seed_post``,
        ``remove_top_nodes``) skip removed agents."""
        self._check_experimenter(agent_id)
        for node in nodes:
            self.check_agent(node)
        chosen = sorted(set(nodes))
        removed = self._remove_nodes(agent_id, chosen, silence)
        return f"{len(removed)} follows of {len(chosen)} agents will be removed" + (" and the agents silenced" if silence else "")

    @tool(readonly=False, experimenter=True)
    def remove_top_nodes(self, agent_id: int, share: Share, by: Centrality = "degree", silence: bool = False,
                         include_removed: bool = False) -> str:
        """Experimenter only: remove every follow to and from the top ``share`` (0-1] of agents by ``by`` (from the
        next step). The count is ``share`` times the agents not removed before (all, with ``include_removed``),
        rounded up, at least 1; with ``silence`` the agents can no longer act here either."""
        self._check_experimenter(agent_id)
        if not 0 < share <= 1:
            raise ValueError(f"share must be in (0, 1], not {share}")
        ranked = self._ranked(by, include_removed=include_removed)
        exact = share * len(ranked)
        chosen = ranked[: max(1, math.ceil(exact))]
        removed = self._remove_nodes(agent_id, chosen, silence)
        rounded = "" if exact == len(chosen) else f" ({share:g} of {len(ranked)} is {exact:g}, rounded up)"
        return (f"{len(removed)} follows of the top {len(chosen)} agents by {by}{rounded} will be removed"
                f"{' and the agents silenced' if silence else ''}: {chosen}")

    @tool(readonly=False, experimenter=True)
    def rewire_follows(self, agent_id: int, fraction: Fraction, seed: int = 0, rewire: bool = True) -> str:
        """Experimenter only: take a random ``fraction`` of all follows and point each at a random other agent
        (``rewire`` false: remove them); from the next step."""
        self._check_experimenter(agent_id)
        if not 0 <= fraction <= 1:
            raise ValueError(f"fraction must be in [0, 1], not {fraction}")
        source, target = self._graph.edges()
        rng = np.random.default_rng(seed)
        picked = np.sort(rng.choice(len(source), size=round(fraction * len(source)), replace=False)) if len(source) else np.empty(0, dtype=np.int64)
        removed = [[int(source[i]), int(target[i])] for i in picked]
        added: list[list[int]] = []
        if rewire:
            agents = self._graph.nodes
            taken = {(u, v) for u, v in zip(source.tolist(), target.tolist(), strict=True)}
            for u, _ in removed:
                for _ in range(32):  # a random other agent not yet followed; give up on the edge after 32 draws
                    w = int(agents[rng.integers(len(agents))])
                    if w != u and (u, w) not in taken:
                        taken.add((u, w))
                        added.append([u, w])
                        break
        self.updates.queue(agent_id, kind="edges", removed=removed, added=added)
        return f"{len(removed)} follows will be removed" + (f" and {len(added)} made to random agents" if rewire else "")

    @tool(readonly=False, experimenter=True)
    def seed_post(self, agent_id: int, text: str, count: Annotated[int, Field(ge=1)] = 1,
                  at: Literal["random", "degree", "group"] = "random", group: str | None = None, seed: int = 0,
                  include_removed: bool = False) -> str:
        """Experimenter only: publish ``text`` as a post by ``count`` agents, chosen at random, the highest degree
        first, or at random among those whose group (the ``groups`` persona field) is ``group`` (at the end of this step).
        Agents an experimenter removed are not chosen, unless ``include_removed``."""
        self._check_experimenter(agent_id)
        text = self._check_text(text)
        agents = self._still_there(self._graph.nodes.tolist(), include_removed)
        if at == "group":
            if not self._groups:
                raise ValueError("at='group' needs the module's groups: give it persona: {groups: <a persona field>}")
            agents = [a for a in agents if str(self._groups.get(a)) == str(group)]
            if not agents:
                known = ", ".join(sorted({str(v) for v in self._groups.values()}))
                raise ValueError(f"no agent is in group {group!r}; the groups: {known}")
        if not 1 <= count <= len(agents):
            raise ValueError(f"count must be between 1 and the {len(agents)} agents, not {count}")
        authors = (self._ranked("degree", include_removed=include_removed)[:count] if at == "degree"
                   else sorted(random.Random(seed).sample(agents, count)))
        self.updates.queue(agent_id, kind="seeded", authors=authors, text=text)
        return f"{count} posts will be published by agents {authors}"

    @tool(readonly=False, experimenter=True)
    def set_feed_rule(self, agent_id: int, algorithm: FeedAlgorithm) -> str:
        """Experimenter only: change the platform's default feed ranking (from the next step)."""
        self._check_experimenter(agent_id)
        self.updates.queue(agent_id, kind="feed_rule", text=algorithm)
        return f"the default feed will be {algorithm}"
