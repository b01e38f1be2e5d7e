"""SearchToolRouter: ranks the tools against the instruction and offers only the top k to a ReAct loop.

Ranking is lexical by default (token overlap of the instruction with each tool's name and
description, deterministic, no model); an embedder adds cosine similarity on top. The decision
schema then names only the top-k tools, so a small model chooses among a handful.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from typing import Protocol, runtime_checkable

from pydantic import Field

from engine.env.base import EnvBase
from engine.env.prompts import REACT_SYSTEM
from engine.env.requests import EnvReply, EnvRequest
from engine.env.router_base import RouterBase, RouterConfig
from engine.env.routers.decision import build_router_decision
from engine.env.routers.react import DecisionCache, react_loop, readonly_note, resolve_instruction, tool_lines
from engine.env.tool import ToolInfo
from engine.errors import ToolCallError
from engine.llm.meter import Meter
from engine.llm.protocol import ChatModel

__all__ = ["Embedder", "SearchToolRouter", "ToolRanker", "search_terms"]

_WORD = re.compile(r"[a-z0-9]+")
#: Words that say nothing about which tool is meant.
_STOPWORDS = frozenset(
    "a an and are as at be by can do for from has have i in is it its me my of on or please so that the "
    "their them then there this to was what when where which who will with you your".split()
)


def search_terms(text: str) -> set[str]:
    """Lower-case word stems of ``text`` (``send_message`` -> {send, message}; plurals folded)."""
    terms = set()
    for word in _WORD.findall(text.lower()):
        if word in _STOPWORDS:
            continue
        terms.add(word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word)
    return terms


@runtime_checkable
class Embedder(Protocol):
    """Anything that embeds texts as vectors (``SimLLM.embed`` qualifies)."""

    def embed(self, texts: list[str]) -> list[list[float]]: ...


def _cosine(a: list[float], b: list[float]) -> float:
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / norm if norm else 0.0


class ToolRanker:
    """Scores tools against an instruction.

    The lexical score, in [0, 1], is the share of the instruction's terms found in the tool's
    name (counted twice) or description (once); with an embedder the cosine similarity of the
    instruction and ``"name: description"`` is added.

    Args:
        tools: the tools to rank, by router name (their order breaks ties).
        embedder: optional; tool vectors are computed once, on first use.
    """

    def __init__(self, tools: dict[str, ToolInfo], embedder: Embedder | None = None) -> None:
        self._order = {name: i for i, name in enumerate(tools)}
        self._names = {name: search_terms(name) for name in tools}
        self._texts = {name: self._names[name] | search_terms(info.description) for name, info in tools.items()}
        self._docs = {name: f"{name}: {info.description}" for name, info in tools.items()}
        self._embedder = embedder
        self._vectors: dict[str, list[float]] | None = None

    def scores(self, instruction: str) -> dict[str, float]:
        """Every tool's score for ``instruction``."""
        query = search_terms(instruction)
        scores = {
            name: (len(query & self._names[name]) + len(query & self._texts[name])) / (2 * len(query)) if query else 0.0
            for name in self._order
        }
        if self._embedder is not None:
            if self._vectors is None:
                self._vectors = dict(zip(self._docs, self._embedder.embed(list(self._docs.values())), strict=True))
            [target] = self._embedder.embed([instruction])
            for name in scores:
                scores[name] += _cosine(target, self._vectors[name])
        return scores

    def top(self, instruction: str, candidates: Iterable[str], k: int) -> list[str]:
        """The ``k`` best of ``candidates``, best first (ties in tool order)."""
        scores = self.scores(instruction)
        return sorted(candidates, key=lambda name: (-scores[name], self._order[name]))[:k]


class SearchToolRouter(RouterBase):
    """Search the tools, then a ReAct loop over the top-k found.

    Args:
        env_modules: the modules, in spec order.
        llm: the routing model.
        meter: where the router's LLM usage accumulates.
        max_steps: tool calls one ask may make.
        top_k: tools offered to the LLM per ask.
        embedder: optional embeddings to rank by meaning as well as by words.
    """

    class Config(RouterConfig):
        top_k: int = Field(5, ge=1, le=100, description="tools offered to the LLM per ask, the best matches of a search")

    def __init__(
        self, env_modules: list[EnvBase], llm: ChatModel | None = None, *, meter: Meter | None = None,
        max_steps: int = 3, top_k: int = 5, embedder: Embedder | None = None,
    ) -> None:
        super().__init__(env_modules, llm, meter=meter, max_steps=max_steps)
        self.top_k = top_k
        self.ranker = ToolRanker(self.tools(), embedder)
        self._decisions = DecisionCache(build_router_decision)

    def search(self, instruction: str, *, readonly: bool = False) -> dict[str, ToolInfo]:
        """The ``top_k`` tools offered to an ask, best first."""
        offered = self.tools(readonly=readonly)
        return {name: offered[name] for name in self.ranker.top(instruction, offered, self.top_k)}

    async def ask(self, request: EnvRequest) -> EnvReply:
        if self.llm is None:
            raise ToolCallError("SearchToolRouter needs an LLM")
        agent_id, readonly = request.agent_id, request.readonly
        instruction = resolve_instruction(request)
        tools = self.search(instruction, readonly=readonly)
        system = REACT_SYSTEM.render(agent_id=agent_id, world=self.get_world_description(), tools=tool_lines(tools),
                                     readonly_note=readonly_note(readonly))
        outcome = await react_loop(self, tools, self._decisions(tools), system=system, agent_id=agent_id,
                                   instruction=instruction, readonly=readonly)
        return outcome.finish()
