"""Every top-level step kind runs in one spec: ticks, ask, intervene, questionnaire, each its own transaction."""

from __future__ import annotations

import json

from engine.society.lease import effective_status
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader


def _spec() -> dict:
    return {
        "name": "steps",
        "seed": 5,
        "llm": {"default": {"model": "sim/default"}},
        "population": [{"count": 4, "profile_template": {"name": "P{i}", "age": [20, 40, 60]}, "config": {"max_react_turns": 2}}],
        "environment": {"modules": [{"type": "MessagingSpace"}]},
        "steps": [
            {"type": "run", "num_steps": 1, "tick": 3600},
            {"type": "ask", "question": "How many people are older than 30?"},
            {"type": "intervene", "instruction": "Tell everyone the library opens late tomorrow."},
            {"type": "questionnaire", "questionnaire_id": "q1", "target_agent_ids": [0, 2],
             "questions": [{"id": "trust", "prompt": "Trust in neighbours (0-10)?", "response_type": "integer", "min": 0, "max": 10}]},
            {"type": "run", "num_steps": 1, "tick": 3600},
        ],
    }


async def test_ask_intervene_and_questionnaire_steps_each_commit_their_outputs(shell, tmp_path):
    run = tmp_path / "run"
    summary = await run_experiment(parse_spec(_spec()), run, shell)
    assert summary.status == "completed", summary.error
    assert effective_status(run) == "completed"
    status = json.loads((run / "SOCIETY_STEP.json").read_text())
    assert status["completed_steps"] == 5 and status["step_count"] == 2
    assert status["txn"] == 5  # two ticks, an ask, an intervention, a questionnaire
    with ReplayReader(run) as reader:
        queries = reader.query("SELECT step_index, step, kind, status, answer, error FROM society_queries ORDER BY step_index").to_pylist()
        assert [(q["step_index"], q["step"], q["kind"]) for q in queries] == [(1, 1, "ask"), (2, 1, "intervene")]
        for q in queries:  # an answer when it worked, the reason when it did not: never both missing
            assert (q["status"] == "ok" and q["answer"]) or (q["status"] == "failed" and q["error"])
        answers = reader.query("SELECT agent_id, value_int FROM questionnaire_answers ORDER BY agent_id").to_pylist()
        assert [a["agent_id"] for a in answers] == [0, 2]
        assert all(a["value_int"] is None or 0 <= a["value_int"] <= 10 for a in answers)
        callers = {r["caller"] for r in reader.query("SELECT DISTINCT caller FROM llm_calls").to_pylist()}
        assert "helper" in callers
    artifacts = sorted(p.name for p in (run / "artifacts").iterdir())
    assert artifacts == ["ask-001.json", "intervene-002.json", "questionnaire-003-q1.json"]
    ask = json.loads((run / "artifacts" / "ask-001.json").read_text())
    assert ask["kind"] == "ask" and ask["plans"], "the helper recorded no plan"
