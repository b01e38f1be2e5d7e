"""The files the reference system's users read, written beside Polis's own when a run came from its files.

- ``pid.json``: the driver's pid and the run's status (``running`` while it runs, then the final
  status), for scripts that poll the reference's status file.
- ``artifacts/ask_step_<i>_<simtime>.md`` and ``artifacts/intervene_step_<i>_<simtime>.md``: the
  question or instruction and the helper's answer, from ``society_queries``.
- ``artifacts/questionnaire_step_<i>_<simtime>.json``: every agent's answers, from ``questionnaire_answers``.
- ``LLM_STATS.json``: calls, tokens and cache hits, agent side and router side, from ``llm_calls``.

``<i>`` is the step's index in ``steps.yaml`` (0-based) and ``<simtime>`` its simulated time as
``YYYYMMDD_HHMMSS``. They are derived from the replay datasets after the run, so they hold exactly
what the datasets hold, and writing them again (after a resume) gives the same files.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.spec import ExperimentSpec, QuestionnaireStep
from engine.storage.atomic import atomic_write_json, atomic_write_text
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import RunLayout

__all__ = ["PID_FILE", "STATS_FILE", "write_pid_file", "write_reference_outputs"]

PID_FILE = "pid.json"
STATS_FILE = "LLM_STATS.json"
_SIDES = {"agent": "caller LIKE 'agent:%'", "router": "caller = 'router'", "helper": "caller NOT LIKE 'agent:%' AND caller <> 'router'"}


def write_pid_file(run_dir: Path, status: str) -> None:
    """Write ``pid.json``: this process's pid, the run's status and when it was written."""
    atomic_write_json(run_dir / PID_FILE, {
        "pid": os.getpid(), "status": status, "run_dir": str(run_dir), "updated_at": datetime.now(UTC).isoformat(),
    }, indent=2)


def _simtime(t: datetime) -> str:
    return f"{t:%Y%m%d_%H%M%S}"


def _query_markdown(row: dict[str, Any]) -> str:
    asked = "Question" if row["kind"] == "ask" else "Instruction"
    lines = [f"# {row['kind'].capitalize()} (step {row['step_index']})", "",
             f"- simulated time: {row['t'].isoformat()}", f"- status: {row['status']}", "",
             f"## {asked}", "", row["text"], "", "## Answer", "", row["answer"] or ""]
    if row["error"]:
        lines += ["", "## Error", "", row["error"]]
    return "\n".join(lines) + "\n"


def _questionnaires(reader: ReplayReader, spec: ExperimentSpec, artifacts: Path) -> list[Path]:
    rows = _rows(reader, "questionnaire_answers",
                 "SELECT step_index, t, questionnaire_id, agent_id, question_id, value_json, raw_text, reason, parse_success, error "
                 "FROM questionnaire_answers ORDER BY step_index, agent_id, question_id")
    by_step: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        by_step[row["step_index"]].append(row)
    written = []
    for index, answers in by_step.items():
        step = spec.steps[index]
        assert isinstance(step, QuestionnaireStep)
        responses: dict[int, dict[str, Any]] = defaultdict(dict)
        for row in answers:
            responses[row["agent_id"]][row["question_id"]] = {
                "value": json.loads(row["value_json"]) if row["value_json"] is not None else None,
                "raw_text": row["raw_text"], "reason": row["reason"], "ok": row["parse_success"], "error": row["error"],
            }
        path = artifacts / f"questionnaire_step_{index}_{_simtime(answers[0]['t'])}.json"
        atomic_write_json(path, {
            "questionnaire_id": step.questionnaire_id, "title": step.title, "description": step.description,
            "t": answers[0]["t"].isoformat(), "questions": [q.model_dump(mode="json") for q in step.questions],
            "responses": [{"agent_id": agent, "answers": given} for agent, given in sorted(responses.items())],
        }, indent=2)
        written.append(path)
    return written


def _llm_stats(reader: ReplayReader) -> dict[str, Any]:
    stats: dict[str, Any] = {}
    for side, where in _SIDES.items():
        [row] = _rows(reader, "llm_calls",
                      "SELECT count(*) AS calls, coalesce(sum(input_tokens), 0)::BIGINT AS input_tokens, "
                      "coalesce(sum(output_tokens), 0)::BIGINT AS output_tokens, count(*) FILTER (WHERE cached) AS cache_hits, "
                      f"count(*) FILTER (WHERE status <> 'ok') AS errors FROM llm_calls WHERE {where}") or [
            dict.fromkeys(("calls", "input_tokens", "output_tokens", "cache_hits", "errors"), 0)]
        stats[side] = {**row, "total_tokens": row["input_tokens"] + row["output_tokens"]}
    stats["total"] = {key: sum(stats[side][key] for side in _SIDES) for key in stats["agent"]}
    return stats


def _rows(reader: ReplayReader, dataset: str, sql: str) -> list[dict[str, Any]]:
    """``sql``'s rows; none when the run never wrote ``dataset`` (no such step, no LLM call)."""
    return reader.query(sql).to_pylist() if dataset in reader.datasets() else []


def write_reference_outputs(run_dir: Path, spec: ExperimentSpec) -> list[Path]:
    """Write the reference's artifacts and ``LLM_STATS.json`` from the run's datasets; returns the paths."""
    artifacts = RunLayout(run_dir).artifacts
    written: list[Path] = []
    with ReplayReader(run_dir) as reader:
        for row in _rows(reader, "society_queries", "SELECT step_index, t, kind, text, status, answer, error "
                         "FROM society_queries ORDER BY step_index"):
            path = artifacts / f"{row['kind']}_step_{row['step_index']}_{_simtime(row['t'])}.md"
            atomic_write_text(path, _query_markdown(row))
            written.append(path)
        written += _questionnaires(reader, spec, artifacts)
        atomic_write_json(run_dir / STATS_FILE, _llm_stats(reader), indent=2)
    return [*written, run_dir / STATS_FILE]
