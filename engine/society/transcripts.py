"""A run's LLM call rows: call ids, the ``llm_calls`` and ``transcripts`` shards, and the transcript cap.

Every site that records LLM calls (agent batches, questionnaire batches, the ask/intervene helper and
the env router's calls the driver drains) turns its :class:`~engine.llm.meter.CallRecord` list into
rows with :func:`call_rows` and writes them with :func:`write_call_shards`, which puts one
``transcripts`` row beside each ``llm_calls`` row in the same staged transaction.

The cap is kept deterministic although batches write in parallel: the driver's
:class:`TranscriptLedger` knows the text bytes committed so far and gives each writer of a
transaction its share of what is left before the writers start; a writer keeps the text of its rows,
in order, while they fit its share, and from the first row that does not fit on keeps only the
metadata (``text_dropped``). Once a writer has dropped text the cap is reached: writers that start
later (the router's calls of the same transaction, every later transaction) keep none. The
committed byte count and whether the cap is reached are part of the run's status, so a resumed run
continues them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.llm.budget import Usage
from engine.llm.meter import CallRecord
from engine.society.datasets import LLM_CALLS, TRANSCRIPTS
from engine.storage.replay import ReplayWriter
from engine.storage.run_layout import RunLocation
from engine.storage.shards import shard_name

__all__ = [
    "TEXT_KEYS",
    "TranscriptLedger",
    "TranscriptTally",
    "call_rows",
    "split_bytes",
    "stage_router_calls",
    "transcript_rows",
    "write_call_shards",
]

#: The keys of a call row that hold its text (the rest are ``llm_calls`` columns).
TEXT_KEYS = ("messages", "reply")


def _call_key(record: CallRecord) -> str:
    if record.agent_id is None or record.caller == f"agent:{record.agent_id}":
        return record.caller
    return f"{record.caller}@agent:{record.agent_id}"  # the router (or helper) serving an agent's ask


def call_rows(records: Iterable[CallRecord], *, run: str, step: int, scope: str) -> list[dict[str, Any]]:
    """The rows of ``records``: ``llm_calls`` columns with ``run``, ``step`` and ``call_id``, plus the text.

    The call id is ``<step>/<scope>/<caller>[@agent:<id>]/<n>``, ``n`` counting the calls of one caller
    for one agent in ``records`` order. One agent's calls come one after another (its ReAct turns,
    the router's calls serving its asks), so that order, and the id, is the same in a seeded re-run,
    and an agent-step run again after its first attempt was undone gets the ids of the undone one.

    Args:
        records: the calls of one scope, in the order they were made per agent.
        run: the run id.
        step: the society step the rows belong to.
        scope: which transaction of ``step`` made them: ``tick``, ``q<index>`` (a questionnaire),
            ``ask-<index>`` or ``intervene-<index>``; every site of one transaction uses its own
            callers, so ids never collide.
    """
    seen: Counter[str] = Counter()
    rows = []
    for record in records:
        key = _call_key(record)
        rows.append({"run": run, "step": step, "call_id": f"{step}/{scope}/{key}/{seen[key]}", **record.as_row(),
                     "messages": record.messages, "reply": record.reply})
        seen[key] += 1
    return rows


@dataclass(frozen=True)
class TranscriptTally:
    """What one writer put in ``transcripts``."""

    rows: int = 0
    dropped: int = 0  #: rows whose text the cap dropped
    text_bytes: int = 0  #: bytes of text kept (what counts against the cap)

    def __add__(self, other: TranscriptTally) -> TranscriptTally:
        return TranscriptTally(self.rows + other.rows, self.dropped + other.dropped, self.text_bytes + other.text_bytes)


def _decision(reply: str | None) -> tuple[str, str, Any] | None:
    """``(thought, tool, arguments)`` of a reply shaped ``{thought, action: {tool, arguments}, ...}``."""
    if not reply or not reply.lstrip().startswith("{"):
        return None
    try:
        value = json.loads(reply)
    except json.JSONDecodeError:
        return None
    action = value.get("action") if isinstance(value, dict) else None
    if not isinstance(value.get("thought"), str) or not isinstance(action, dict) or not isinstance(action.get("tool"), str):
        return None
    return value["thought"], action["tool"], action.get("arguments")


def transcript_rows(calls: Sequence[dict[str, Any]], allowance: int) -> tuple[list[dict[str, Any]], TranscriptTally]:
    """The ``transcripts`` rows of :func:`call_rows` rows, text kept while it fits ``allowance`` bytes.

    A row's ``text_bytes`` is its messages as stored (JSON) plus its reply in UTF-8. Rows keep their
    text in order until the first that would pass ``allowance``; it and every later row keep
    metadata only (``text_dropped``).
    """
    rows, used, dropped, full = [], 0, 0, False
    for call in calls:
        messages, reply = call.get("messages") or [], call.get("reply")
        size = len(json.dumps(messages, default=str, sort_keys=True)) + len((reply or "").encode())
        full = full or used + size > allowance
        row = {key: call.get(key) for key in ("run", "step", "call_id", "caller", "agent_id", "role", "prompt_name",
                                               "status", "error")}
        row.update(text_bytes=size, text_dropped=full)
        if full:
            dropped += 1
        else:
            used += size
            decision = _decision(reply)
            row.update(messages=messages, reply=reply)
            if decision is not None:
                row.update(thought=decision[0], tool=decision[1], arguments=decision[2])
        rows.append(row)
    return rows, TranscriptTally(len(rows), dropped, used)


def write_call_shards(
    writer: ReplayWriter, part: str, calls: Sequence[dict[str, Any]], allowance: int | None
) -> tuple[list[str], TranscriptTally]:
    """Write shard ``part`` of ``llm_calls`` and, unless transcripts are off, of ``transcripts``.

    Args:
        writer: the transaction's writer.
        part: the shard name.
        calls: :func:`call_rows` rows.
        allowance: the text bytes this writer may keep; None: transcripts are off.

    Returns:
        The keys written (staged) and what went into ``transcripts``.
    """
    written = [writer.write_shard(LLM_CALLS, part, [{k: v for k, v in c.items() if k not in TEXT_KEYS} for c in calls])]
    tally = TranscriptTally()
    if allowance is not None:
        rows, tally = transcript_rows(calls, allowance)
        written.append(writer.write_shard(TRANSCRIPTS, part, rows))
    return [p for p in written if p is not None], tally


def split_bytes(total: int | None, parts: int) -> list[int | None]:
    """``total`` bytes shared over ``parts`` writers (the first ones get the remainder); None stays None."""
    if total is None:
        return [None] * parts
    base, extra = divmod(max(0, total), max(parts, 1))
    return [base + (i < extra) for i in range(parts)]


@dataclass
class TranscriptLedger:
    """The driver's account of transcript text against the run's cap (sans-IO).

    A transaction :meth:`open` s with the writers it starts, :meth:`add` s what each wrote, and
    :meth:`commit` s with the run's status; a transaction that fails is opened again from the last
    committed count.
    """

    max_bytes: int | None  #: the run's cap; None: transcripts are off
    committed: int = 0  #: text bytes in committed transactions
    full: bool = False  #: a committed transaction dropped text: the cap is reached
    pending: int = 0  #: text bytes written by the open transaction
    pending_full: bool = False  #: a writer of the open transaction dropped text

    def open(self, writers: int) -> list[int | None]:
        """Start a transaction; returns each of its first ``writers`` writers' share of what is left."""
        self.pending, self.pending_full = 0, False
        return split_bytes(self.left(), writers)

    def left(self) -> int | None:
        """What is left for writers that start now (None: transcripts are off)."""
        if self.max_bytes is None:
            return None
        return 0 if self.full or self.pending_full else max(0, self.max_bytes - self.committed - self.pending)

    def add(self, tally: TranscriptTally) -> None:
        self.pending += tally.text_bytes
        self.pending_full = self.pending_full or tally.dropped > 0

    def commit(self) -> None:
        """The open transaction commits."""
        self.committed, self.full = self.committed + self.pending, self.full or self.pending_full
        self.pending, self.pending_full = 0, False

    def state(self) -> dict[str, Any]:
        """What the run's status keeps (:meth:`restore` reads it back)."""
        return {"text_bytes": self.committed, "full": self.full}

    @classmethod
    def restore(cls, max_bytes: int | None, state: dict[str, Any] | None) -> TranscriptLedger:
        """The ledger of a run whose status holds ``state`` (None: a fresh run)."""
        return cls(max_bytes, int((state or {}).get("text_bytes", 0)), bool((state or {}).get("full", False)))


def stage_router_calls(
    records: Iterable[CallRecord], run_dir: RunLocation, run_id: str, *, step: int, txn: int, scope: str, ledger: TranscriptLedger
) -> tuple[list[str], Usage]:
    """Stage the env router's call records the driver drained in transaction ``txn``; their text gets
    what the transaction's other writers left of the cap. Returns the staged keys and the calls'
    provider usage."""
    calls = call_rows(records, run=run_id, step=step, scope=scope)
    writer = ReplayWriter(run_dir, txn=txn)
    keys, tally = write_call_shards(writer, shard_name(step, f"router-{txn:06d}"), calls, ledger.left())
    ledger.add(tally)
    return keys, Usage.of_calls(calls)
