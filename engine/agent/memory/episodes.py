"""Event memory: typed episodes that ``finish(memories=[...])`` appends to ``memory/episodes.jsonl``.

The file is append-only; a crash loses at most its torn last line, which reading skips. Search is a
plain token-overlap ranking, so the same file and query always give the same answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.agent.workspace import AgentWorkspace

__all__ = ["EPISODES_FILE", "Episode", "EpisodeIn", "EpisodeKind", "EpisodeStore", "FinishWithMemories", "tokens"]

#: Where episodes live, relative to the workspace root.
EPISODES_FILE = "memory/episodes.jsonl"

EpisodeKind = Literal["social", "place", "commitment", "plan_outcome", "fact", "feeling"]

_TOKEN = re.compile(r"\w+", re.UNICODE)


def tokens(text: str) -> set[str]:
    """Lower-cased word tokens of ``text`` (the unit of :meth:`EpisodeStore.search`)."""
    return {token.lower() for token in _TOKEN.findall(text)}


class EpisodeIn(BaseModel):
    """One memory as the model writes it in ``finish``."""

    model_config = ConfigDict(extra="forbid")
    kind: EpisodeKind = Field(description="social | place | commitment | plan_outcome | fact | feeling")
    text: str = Field(min_length=1, max_length=500, description="what to remember, in one sentence")
    importance: int = Field(default=3, ge=1, le=5, description="1 (trivial) to 5 (life-changing)")


class Episode(EpisodeIn):
    """A stored episode: what the model wrote plus when it was written."""

    t: datetime | None = None  #: simulated time of the step that wrote it
    step: int = 0  #: the agent's step count when it was written


class FinishWithMemories(BaseModel):
    """Arguments of ``finish`` that also carry memories (drop-in for ``FinishArgs``)."""

    model_config = ConfigDict(extra="forbid")
    summary: str = Field(description="what you did this step, in one or two sentences")
    memories: list[EpisodeIn] = Field(
        default_factory=list, max_length=10, description="things worth remembering from this step (may be empty)"
    )


class EpisodeStore:
    """Append and look up the episodes of one agent.

    Every read goes to the file, so two stores over one workspace (the agent's and its memory
    tools') never disagree.

    Args:
        workspace: the agent's workspace.
    """

    def __init__(self, workspace: AgentWorkspace) -> None:
        self.workspace = workspace
        self.skipped = 0  #: unreadable lines seen by the last read (a torn tail after a crash)

    def finish(
        self, memories: Iterable[EpisodeIn | dict[str, Any]] = (), *, t: datetime | None = None, step: int = 0
    ) -> list[Episode]:
        """Append the memories a step finished with; returns what was stored.

        Args:
            memories: ``EpisodeIn`` objects or dicts of the same shape.
            t: the step's simulated time.
            step: the agent's step count.

        Raises:
            pydantic.ValidationError: a memory of the wrong shape (the ReAct schema prevents this).
        """
        episodes = [
            Episode(**(m.model_dump() if isinstance(m, EpisodeIn) else EpisodeIn.model_validate(m).model_dump()), t=t, step=step)
            for m in memories
        ]
        if episodes:
            self.workspace.append_jsonl(EPISODES_FILE, [e.model_dump(mode="json") for e in episodes])
        return episodes

    def all(self) -> list[Episode]:
        """Every readable episode, oldest first."""
        self.skipped = 0
        if not self.workspace.is_file(EPISODES_FILE):
            return []
        episodes = []
        for line in self.workspace.read_text(EPISODES_FILE).splitlines():
            if not line.strip():
                continue
            try:
                episodes.append(Episode.model_validate(json.loads(line)))
            except (json.JSONDecodeError, ValidationError):
                self.skipped += 1
        return episodes

    def recent(self, n: int = 10, *, kind: EpisodeKind | None = None) -> list[Episode]:
        """The last ``n`` episodes (of ``kind``, if given), oldest first."""
        episodes = [e for e in self.all() if kind is None or e.kind == kind]
        return episodes[-n:] if n > 0 else []

    def search(self, query: str, kind: EpisodeKind | None = None, limit: int = 10) -> list[Episode]:
        """Episodes sharing words with ``query``, best first.

        Ranked by shared tokens, then importance, then recency. An empty query returns the most
        recent episodes (newest first).

        Args:
            query: words to look for.
            kind: only episodes of this kind.
            limit: at most this many.
        """
        wanted = tokens(query)
        indexed = [(i, e) for i, e in enumerate(self.all()) if kind is None or e.kind == kind]
        if not wanted:
            return [e for _, e in reversed(indexed)][:limit]
        scored = [(len(wanted & tokens(e.text)), e.importance, i, e) for i, e in indexed]
        ranked = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], -s[1], -s[2]))
        return [e for *_, e in ranked][:limit]
