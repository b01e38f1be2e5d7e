"""How a run ends: the honest verdict on a run whose steps all ran (statuses: :mod:`engine.run_status`).

A run with failures is not plainly ``completed``: it is ``completed_with_errors``, and ``failed`` once
the share of failures passes the spec's ``max_error_rate``. A failure is an agent-step that ended in
``error`` or ``llm_error`` (an LLM call that failed after its retries), a questionnaire answer with no
valid value (its call failed, or every reply was malformed), or an ask or intervene step that failed;
the share is of all three together. A run with action rows missing (an agent-step that never reached
the replay) is ``failed`` whatever the rate. ``judge`` is the sans-IO rule; ``read_run_tally`` reads the
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
    answers: int = 0  #: rows in ``questionnaire_answers``
    answer_errors: int = 0  #: of which without a valid value
    first_answer_error: str | None = None
    queries: int = 0  #: ask and intervene steps (rows in ``society_queries``)
    query_errors: int = 0  #: of which failed
    first_query_error: str | None = None

    @property
    def failures(self) -> int:
        """Agent-steps in error, answers without a value and failed ask or intervene steps."""
        return self.errors + self.answer_errors + self.query_errors

    @property
    def first_failure(self) -> str | None:
        """The first agent-step error, else the first failed answer, else the first failed ask or intervene."""
        return self.first_error or self.first_answer_error or self.first_query_error


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
    if tally.failures == 0:
        return Verdict(RunStatus.COMPLETED, None)
    parts = [(tally.errors, expected_agent_steps, "agent-steps ended in error"),
             (tally.answer_errors, tally.answers, "questionnaire answers have no valid value"),
             (tally.query_errors, tally.queries, "ask or intervene steps failed")]
    rate = tally.failures / max(expected_agent_steps + tally.answers + tally.queries, 1)
    summary = "; ".join(f"{failed} of {total} {what}" for failed, total, what in parts if failed)
    summary += f" ({rate:.1%} of all); first: {tally.first_failure}"
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
        answers = _failures(reader, names, "questionnaire_answers", "NOT parse_success", "step_index, agent_id, question_id",
                            "'questionnaire ' || questionnaire_id || ' (step ' || coalesce(CAST(step_index AS VARCHAR), '?') || '), agent ' || agent_id "
                            "|| ', ' || question_id")
        queries = _failures(reader, names, "society_queries", "status <> 'ok'", "step_index",
                            "kind || ' (step ' || coalesce(CAST(step_index AS VARCHAR), '?') || ')'")
    return RunTally(int(rows), int(steps), int(errors), first, int(calls), int(tokens_in), int(tokens_out),
                    int(transcripts), int(dropped), *answers, *queries)


def _failures(reader: ReplayReader, names: set[str], dataset: str, failed: str, order: str, where: str) -> tuple[int, int, str | None]:
    """Rows of ``dataset``, those matching ``failed``, and the first of them (by ``order``) as ``<where>: <error>``."""
    if dataset not in names:
        return 0, 0, None
    total, bad = reader.query(f"SELECT count(*), count(*) FILTER (WHERE {failed}) FROM {dataset}").to_pylist()[0].values()
    found = reader.query(f"SELECT {where} AS place, error FROM {dataset} WHERE {failed} ORDER BY {order} LIMIT 1").to_pylist()
    first = None
    if found:
        message = (found[0]["error"] or "").strip().splitlines()
        first = f"{found[0]['place']}: {message[0] if message else '?'}"
    return int(total), int(bad), first
