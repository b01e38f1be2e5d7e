"""The env's tool calls as data: the ``env_tool_calls`` replay dataset and its rows.

Every :meth:`EnvBase.call_tool` leaves one record in its module's history. The history holds the
current env step only: each env step drains it (:meth:`RouterBase.drain_tool_calls`) into one shard
of ``env_tool_calls``, staged in the tick's transaction like every other shard, so the env actor's
memory does not grow with the run. Arguments are kept whole as JSON; a result is kept as a summary,
its JSON text cut to :data:`RESULT_CHARS` characters.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from engine.storage.catalog import RUN_COLUMN, Column, DatasetSchema

__all__ = ["ENV_TOOL_CALLS", "RESULT_CHARS", "summarize_result", "tool_call_rows"]

#: How much of a result's JSON text a row keeps (``result_chars`` says how long it was).
RESULT_CHARS = 500

ENV_TOOL_CALLS = DatasetSchema(
    name="env_tool_calls",
    kind="env",
    description="one row per env tool call (observations, routed asks, direct calls, the helper's calls), "
                "written by the env step whose transaction they belong to",
    columns=(
        RUN_COLUMN,
        Column(name="step", type="int64", description="society step (1-based) whose env step wrote the call"),
        Column(name="t", type="timestamp", description="simulated time at the end of that step"),
        Column(name="seq", type="int64", description="order of the call within the step (0-based, by call time)"),
        Column(name="module", type="string", description="env module class that ran the tool"),
        Column(name="tool", type="string", description="tool name"),
        Column(name="agent_id", type="int64",
               description="the agent the call was for (its agent_id argument, else the agent served); -1 the experimenter"),
        Column(name="arguments", type="json", description="validated arguments as JSON text"),
        Column(name="result", type="string",
               description=f"JSON text of the return value, cut to {RESULT_CHARS} characters (null when the call failed)"),
        Column(name="result_chars", type="int64", description="length of the return value's full JSON text"),
        Column(name="ok", type="bool", description="false when the tool raised"),
        Column(name="error", type="string", description="the exception the tool raised (repr)"),
        Column(name="trace_id", type="string", description="trace of the request that made the call (joins spans)"),
        Column(name="span_id", type="string", description="span open when the call ran, e.g. the actor's env.ask (joins spans)"),
        Column(name="called_at", type="timestamp", description="wall-clock time of the call (UTC)"),
    ),
)


def summarize_result(value: Any) -> tuple[str, int]:
    """The JSON text of ``value`` cut to :data:`RESULT_CHARS` characters, and its full length."""
    text = json.dumps(value, default=str, ensure_ascii=False, sort_keys=True)
    return (text if len(text) <= RESULT_CHARS else text[:RESULT_CHARS] + "…"), len(text)


def _row(run: str, step: int, t: datetime, seq: int, record: dict[str, Any]) -> dict[str, Any]:
    failed = bool(record.get("exception_occurred"))
    result, chars = (None, None) if failed else (record["result"], record["result_chars"])
    return {
        "run": run, "step": step, "t": t, "seq": seq, "module": record.get("module"), "tool": record["function_name"],
        "agent_id": record.get("agent_id"), "arguments": record.get("kwargs") or {}, "result": result,
        "result_chars": chars, "ok": not failed, "error": record.get("exception_info") if failed else None,
        "trace_id": record.get("trace_id"), "span_id": record.get("span_id"),
        "called_at": datetime.fromtimestamp(record["timestamp"], UTC),
    }


def tool_call_rows(run: str, step: int, t: datetime, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``env_tool_calls`` rows of one env step from its history records (any order; sorted by call time).

    Args:
        run: the run id the rows carry.
        step: the society step whose env step drains the records.
        t: simulated time at the end of that step.
        records: history records as :meth:`EnvBase.get_tool_call_history` returns them.
    """
    ordered = sorted(records, key=lambda r: r["timestamp"])
    return [_row(run, step, t, seq, record) for seq, record in enumerate(ordered)]
