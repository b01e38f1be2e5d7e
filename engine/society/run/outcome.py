"""How a run ends: the honest verdict on a run whose steps all ran (statuses: :mod:`engine.run_status`).

A run whose agent-steps ended in ``error`` or ``llm_error`` (an LLM call that failed after its
retries) is not plainly ``completed``: it is
``completed_with_errors``, and ``failed`` once the share of errors passes the spec's
``max_error_rate``. A run with action rows missing (an agent-step that never reached the replay)
is ``failed`` whatever the rate. ``judge`` is the sans-IO rule; ``read_run_tally`` reads the
committed replay with DuckDB.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.run_status import RunStatus
from engine.storage.query_limits import QueryLimits
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import RunLocation

__all__ = ["RunTally", "Verdict", "judge", "read_run_tally"]

#: The verdict's few aggregate queries must not fail on a large run (they are the engine's, not a user's SQL).
_TALLY_LIMITS = QueryLimits(memory_limit="4GB", timeout_s=600)


@dataclass(frozen=True)
class RunTally:
    """What the committed replay holds for a run's ticks."""

    action_rows: int  #: rows in ``actions``
    agent_steps: int  #: distinct (agent, step) pairs among them
    errors: int  #: agent-steps whose status is ``error`` or ``llm_error``
    first_error: str | None  #: the earliest error (step, agent and message)
    llm_calls: int  #: rows in ``llm_calls``: agents, router, questionnaires, helper
    input_tokens: int
    output_tokens: int
    transcripts: int = 0  #: rows in ``transcripts``
    transcripts_dropped: int = 0  #: of which the transcript cap dropped the text


@dataclass(frozen=True)
class Verdict:
    """The end status of a run whose steps all ran, and why."""

    status: RunStatus
    error: str | None


def judge(tally: RunTally, *, expected_agent_steps: int, max_error_rate: float) -> Verdict:
    """Decide how a run whose steps all ran ends.

    Args:
        tally: what the replay holds.
        expected_agent_steps: agents x ticks run (every agent once per tick).
        max_error_rate: the share of agent-steps in error above which the run fails.
    """
    if tally.agent_steps != expected_agent_steps or tally.action_rows != tally.agent_steps:
        missing = expected_agent_steps - tally.agent_steps
        what = (f"{missing} of {expected_agent_steps} agent-steps have no action row" if missing > 0
                else f"{tally.action_rows} action rows for {tally.agent_steps} agent-steps (expected {expected_agent_steps})")
        return Verdict(RunStatus.FAILED, f"the replay is incomplete: {what}")
    if tally.errors == 0:
        return Verdict(RunStatus.COMPLETED, None)
    rate = tally.errors / max(expected_agent_steps, 1)
    summary = f"{tally.errors} of {expected_agent_steps} agent-steps ended in error ({rate:.1%}); first: {tally.first_error}"
    if rate > max_error_rate:
        return Verdict(RunStatus.FAILED, f"error rate {rate:.1%} is above max_error_rate {max_error_rate:.1%}: {summary}")
    return Verdict(RunStatus.COMPLETED_WITH_ERRORS, summary)


def read_run_tally(run_dir: RunLocation) -> RunTally:
    """Count the committed action rows, their errors, the LLM calls and the transcripts of ``run_dir``."""
    with ReplayReader(run_dir, limits=_TALLY_LIMITS) as reader:
        names = set(reader.datasets())
        rows = steps = errors = 0
        first: str | None = None
        if "actions" in names:
            rows, steps, errors = reader.query(
                "SELECT count(*), count(DISTINCT (agent_id, step)), count(*) FILTER (WHERE status IN ('error', 'llm_error')) FROM actions"
            ).to_pylist()[0].values()
            found = reader.query(
                "SELECT step, agent_id, error FROM actions WHERE status IN ('error', 'llm_error') ORDER BY step, agent_id LIMIT 1"
            ).to_pylist()
            if found:
                message = (found[0]["error"] or "").strip().splitlines()
                first = f"step {found[0]['step']}, agent {found[0]['agent_id']}: {message[0] if message else '?'}"
        calls = tokens_in = tokens_out = 0
        if "llm_calls" in names:
            calls, tokens_in, tokens_out = reader.query(
                "SELECT count(*), coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0) FROM llm_calls"
            ).to_pylist()[0].values()
        transcripts = dropped = 0
        if "transcripts" in names:
            transcripts, dropped = reader.query(
                "SELECT count(*), count(*) FILTER (WHERE text_dropped) FROM transcripts"
            ).to_pylist()[0].values()
    return RunTally(int(rows), int(steps), int(errors), first, int(calls), int(tokens_in), int(tokens_out),
                    int(transcripts), int(dropped))
