"""The conversation thread: a window of recent turns; older turns are compacted into ``AGENT_MEMORY.md``.

When the thread's text passes ``max_chars``, every turn older than the last ``window_turns`` (and
more, if the window alone is too long) goes to the model in ONE structured call, together with the
current ``AGENT_MEMORY.md``; the model returns the updated memory. The file never exceeds
``memory_limit_chars``: the prompt asks the model to fit when the merged text would not, and if
its answer is still too long the oldest paragraphs are dropped (and logged). A failed call keeps
the turns and logs the failure; nothing is written in place of a summary.

Files (relative to the workspace):
    AGENT_MEMORY.md                            the compacted long-term summary
    .runtime/logs/session_state.json           ``{"thread": [...]}``, the window across ticks
    .runtime/logs/memory_compactions.jsonl     one record per compaction attempt
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.agent.workspace import AgentWorkspace
from engine.errors import LLMCallError, SpecError, StructuredOutputError
from engine.llm.prompt import PromptTemplate
from engine.llm.protocol import ChatModel
from engine.llm.structured import complete_structured

__all__ = [
    "COMPACTION_LOG",
    "COMPACT_FIT_PROMPT",
    "COMPACT_PROMPT",
    "MEMORY_FILE",
    "SESSION_FILE",
    "Compaction",
    "CompactionResult",
    "MemoryConfig",
    "ThreadMemory",
    "fit_paragraphs",
    "read_memory_summary",
]

MEMORY_FILE = "AGENT_MEMORY.md"
SESSION_FILE = ".runtime/logs/session_state.json"
#: The kept turns, one JSON line each: appended every step, rewritten only when compaction drops turns.
#: (Replacing a file by rename costs ~1 ms on ext4, which flushes it first; appends do not.)
WINDOW_FILE = ".runtime/logs/thread_window.jsonl"
COMPACTION_LOG = ".runtime/logs/memory_compactions.jsonl"

COMPACT_PROMPT = PromptTemplate(
    "memory.compact",
    "You maintain the long-term memory of a simulated person. Merge the older conversation turns "
    "below into the memory: keep facts, relationships, commitments, plans and their outcomes; drop "
    "chit-chat and tool mechanics. Write short paragraphs separated by blank lines, oldest first. "
    "Return the complete updated memory as `summary`, at most {limit} characters.{fit}\n\n"
    "Current memory:\n{memory}\n\n"
    "Older turns to merge:\n{turns}",
)

COMPACT_FIT_PROMPT = PromptTemplate(
    "memory.compact.fit",
    "\nThe current memory and the new turns together are longer than {limit} characters: condense "
    "them, shortening or dropping the oldest and least important details first, so the result fits.",
)


class Compaction(BaseModel):
    """The model's answer to a compaction call."""

    model_config = ConfigDict(extra="forbid")
    summary: str = Field(description="the complete updated memory, short paragraphs separated by blank lines, oldest first")


class MemoryConfig(BaseModel):
    """Thread-memory settings, read from the agent's ``config["memory"]`` (never from the profile)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    window_turns: int = Field(default=12, ge=0)  #: turns always kept verbatim
    max_chars: int = Field(default=8000, ge=1)  #: thread text that triggers a compaction
    memory_limit_chars: int = Field(default=4000, ge=1)  #: hard ceiling of AGENT_MEMORY.md

    @classmethod
    def from_agent_config(cls, config: dict[str, Any]) -> MemoryConfig:
        """Read ``config["memory"]``.

        Raises:
            SpecError: unknown keys or invalid values (path ``config.memory``).
        """
        try:
            return cls.model_validate(config.get("memory") or {})
        except ValidationError as error:
            raise SpecError(str(error), path="config.memory") from None


@dataclass
class CompactionResult:
    """What one compaction attempt did (also the record written to the compaction log)."""

    status: str  #: ok | failed
    turns_compacted: int  #: turns folded into the memory (0 when failed)
    thread_chars_before: int
    thread_chars_after: int
    memory_chars: int  #: AGENT_MEMORY.md after the attempt
    asked_to_fit: bool = False  #: the prompt asked the model to condense
    dropped: list[str] = field(default_factory=list)  #: text cut to stay under the limit, oldest first
    error: str | None = None
    t: str | None = None


def read_memory_summary(workspace: AgentWorkspace) -> str:
    """The text of ``AGENT_MEMORY.md`` ('' when nothing was compacted yet)."""
    return workspace.read_text(MEMORY_FILE) if workspace.is_file(MEMORY_FILE) else ""


def fit_paragraphs(text: str, limit: int) -> tuple[str, list[str]]:
    """Cut ``text`` to at most ``limit`` characters by dropping its oldest (first) paragraphs.

    A last paragraph still too long keeps its end. Returns the fitted text and what was cut.
    """
    paragraphs = [p.strip() for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    dropped: list[str] = []
    while len(paragraphs) > 1 and len("\n\n".join(paragraphs)) > limit:
        dropped.append(paragraphs.pop(0))
    if paragraphs and len(paragraphs[0]) > limit:
        head, paragraphs[0] = paragraphs[0][: len(paragraphs[0]) - limit], paragraphs[0][len(paragraphs[0]) - limit :]
        dropped.append(head)
    return "\n\n".join(paragraphs), dropped


def _chars(turns: Iterable[dict[str, Any]]) -> int:
    return sum(len(str(turn.get("role", ""))) + 2 + len(str(turn.get("content", ""))) for turn in turns)


class ThreadMemory:
    """The thread window of one agent and its compaction into ``AGENT_MEMORY.md``.

    Args:
        workspace: the agent's workspace.
        llm: the agent's (metered) model; one call per compaction.
        window_turns: the most recent turns, never compacted.
        max_chars: thread text above which :meth:`maybe_compact` compacts.
        memory_limit_chars: the ceiling of ``AGENT_MEMORY.md``.
        max_attempts: structured-output attempts of the compaction call.

    Raises:
        WorkspaceError: a corrupt ``session_state.json``.
    """

    def __init__(
        self,
        workspace: AgentWorkspace,
        llm: ChatModel,
        *,
        window_turns: int = 12,
        max_chars: int = 8000,
        memory_limit_chars: int = 4000,
        max_attempts: int = 2,
    ) -> None:
        self.workspace = workspace
        self.llm = llm
        self.window_turns = window_turns
        self.max_chars = max_chars
        self.memory_limit_chars = memory_limit_chars
        self.max_attempts = max_attempts
        self._turns: list[dict[str, Any]] = self._read_window()
        self._persisted = len(self._turns)  #: turns already in WINDOW_FILE
        self._rewrite = False  #: compaction dropped turns: WINDOW_FILE must be rewritten

    @classmethod
    def from_config(cls, workspace: AgentWorkspace, llm: ChatModel, config: dict[str, Any]) -> ThreadMemory:
        """Build with the settings of ``config["memory"]`` (see :class:`MemoryConfig`)."""
        settings = MemoryConfig.from_agent_config(config)
        return cls(workspace, llm, **settings.model_dump())

    # ---- the window ----------------------------------------------------------------------------
    @property
    def turns(self) -> list[dict[str, Any]]:
        """The kept turns, oldest first."""
        return list(self._turns)

    def append(self, messages: Iterable[dict[str, Any]]) -> None:
        """Add turns. System messages are skipped: they are rebuilt every step, not conversation."""
        for message in messages:
            if message.get("role") != "system":
                self._turns.append({k: message[k] for k in ("t", "role", "content") if k in message})

    def chars(self) -> int:
        """Size of the thread text (roles and contents)."""
        return _chars(self._turns)

    def context(self) -> list[dict[str, Any]]:
        """The kept turns as chat messages (``role`` and ``content`` only)."""
        return [{"role": turn["role"], "content": turn["content"]} for turn in self._turns]

    def summary(self) -> str:
        """The current ``AGENT_MEMORY.md``."""
        return read_memory_summary(self.workspace)

    # ---- compaction ----------------------------------------------------------------------------
    def _split(self, limit: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        keep = self._turns[len(self._turns) - self.window_turns :] if self.window_turns else []
        older = self._turns[: len(self._turns) - len(keep)]
        while len(keep) > 1 and _chars(keep) > limit:
            older.append(keep.pop(0))
        return older, keep

    async def maybe_compact(self, *, t: datetime | None = None, max_chars: int | None = None,
                            keep_chars: int | None = None) -> CompactionResult | None:
        """Compact the older turns when the thread is longer than ``max_chars`` (default: the configured one; the
        lower of the two when given: an agent's share of its context budget), keeping at most ``keep_chars`` of the
        newest turns verbatim (default: the limit; less makes the next compaction some steps away).

        Returns:
            None when nothing needed compacting, else the attempt's result (also logged).

        Raises:
            BudgetExhaustedError: the run's budget allows no further call (turns are kept).
        """
        before = self.chars()
        limit = self.max_chars if max_chars is None else max(1, min(self.max_chars, max_chars))
        if before <= limit:
            return None
        older, keep = self._split(limit if keep_chars is None else max(1, min(limit, keep_chars)))
        if not older:
            return None
        existing = self.summary()
        transcript = "\n".join(
            (f"[{turn['t']}] " if turn.get("t") else "") + f"{turn.get('role')}: {turn.get('content')}" for turn in older
        )
        asked_to_fit = len(existing) + 2 + len(transcript) > self.memory_limit_chars
        prompt = COMPACT_PROMPT.render(
            limit=self.memory_limit_chars,
            fit=COMPACT_FIT_PROMPT.render(limit=self.memory_limit_chars) if asked_to_fit else "",
            memory=existing or "(empty)",
            turns=transcript,
        )
        stamp = t.isoformat() if t else None
        try:
            answer = await complete_structured(
                self.llm, [{"role": "user", "content": prompt}], Compaction, prompt=COMPACT_PROMPT, max_attempts=self.max_attempts
            )
        except (StructuredOutputError, LLMCallError) as error:
            result = CompactionResult(
                "failed", 0, before, before, len(existing), asked_to_fit, error=str(error)[:500], t=stamp
            )
            self._log(result)
            return result
        text, dropped = fit_paragraphs(answer.summary, self.memory_limit_chars)
        self.workspace.write_text(MEMORY_FILE, text)
        self._turns = keep
        self._rewrite = True
        result = CompactionResult("ok", len(older), before, self.chars(), len(text), asked_to_fit, dropped, t=stamp)
        self._log(result)
        return result

    # ---- persistence ---------------------------------------------------------------------------
    def _read_session(self) -> dict[str, Any]:
        if not self.workspace.exists(SESSION_FILE):
            return {}
        session = self.workspace.read_json(SESSION_FILE)
        return session if isinstance(session, dict) else {}

    def _log(self, result: CompactionResult) -> None:
        self.workspace.append_jsonl(COMPACTION_LOG, [asdict(result)])

    def _read_window(self) -> list[dict[str, Any]]:
        # A torn last line from a crash mid-append is skipped: that turn is lost, nothing else.
        return self.workspace.read_jsonl(WINDOW_FILE)

    def save(self) -> None:
        """Persist the window: append the new turns, or rewrite it after a compaction."""
        if self._rewrite:
            text = "".join(json.dumps(turn, ensure_ascii=False, default=str) + "\n" for turn in self._turns)
            self.workspace.write_text(WINDOW_FILE, text)
            session = self._read_session()
            session["thread"] = {"window_file": WINDOW_FILE, "turns": len(self._turns)}
            self.workspace.write_json(SESSION_FILE, session)
        else:
            self.workspace.append_jsonl(WINDOW_FILE, self._turns[self._persisted :])
        self._persisted = len(self._turns)
        self._rewrite = False
