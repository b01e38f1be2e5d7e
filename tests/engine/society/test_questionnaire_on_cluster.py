"""Questionnaires fanned out over a real LocalCluster on the simulated LLM, read back with real DuckDB."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from engine.agent.person import PersonAgent
from engine.agent.service_proxy import ServiceProxy
from engine.agent.workspace import workspace_path
from engine.errors import BudgetExhaustedError
from engine.llm.budget import Allowance
from engine.llm.client import LLMClient
from engine.society.questionnaire.batch import distribute_questionnaire, questionnaire_artifact
from engine.society.questionnaire.items import Questionnaire
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import run_store
from engine.storage.staging import commit_staged, staged_key, staged_txn

T = datetime(2026, 1, 1, 18)
MOODS = ("good", "neutral", "bad")
SURVEY = Questionnaire(
    questionnaire_id="wellbeing",
    title="Wellbeing",
    description="How is life in town?",
    questions=(
        {"id": "happiness", "prompt": "How happy are you?", "response_type": "integer", "min": 1, "max": 7},
        {"id": "trust", "prompt": "How much do you trust your neighbours?", "response_type": "float", "min": 0, "max": 1},
        {"id": "mood", "prompt": "Your mood today?", "response_type": "choice", "choices": list(MOODS)},
        {"id": "note", "prompt": "Anything else to tell us?", "response_type": "text"},
    ),
)


def _make_agents(run: Path, ids: range) -> None:
    """Workspaces as AgentSociety.init creates them; some agents already have recent activity."""
    for i in ids:
        ws = workspace_path(run / "agents", i)
        PersonAgent.create(ws, agent_id=i, profile={"name": f"P{i}", "age": 20 + i % 50}, config={})
        if i % 3 == 0:
            (ws / "AGENT.json").write_text(json.dumps({"id": i, "type": "PersonAgent", "step_count": 2,
                                                       "state": {"recent": [f"met agent {i + 1} at the market"]}}))


def _proxy(run: Path) -> ServiceProxy:
    # Answering reads no environment, so the proxy carries none.
    return ServiceProxy(env=None, llm={"default": LLMClient(model="sim/default", seed=11)}, run_dir=run, run_id="qrun")


def _digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


async def test_a_questionnaire_over_100_agents_gives_100_x_4_typed_rows(dask_client, tmp_path):
    run = tmp_path / "run"
    _make_agents(run, range(100))
    before = _digest(run / "agents")
    batches = []

    response, paths = await distribute_questionnaire(
        dask_client, SURVEY, list(range(100)), proxy=_proxy(run), txn=5, step_count=2, step_index=1, t=T,
        batch_size=13, max_workers=2, on_batch=batches.append,
    )

    assert len(batches) == 8 and sorted(b.batch for b in batches) == list(range(8))
    assert len({b.worker_pid for b in batches}) == 2  # both workers answered
    assert (response.ok, response.failed, response.agents, response.agents_answered) == (400, 0, 100, 100)
    assert response.llm_calls == 100 and response.usage.calls == 100
    assert all(staged_txn(p) is not None and staged_txn(p)[1] == 5 for p in paths)
    with ReplayReader(run) as reader:  # staged rows stay invisible until the transaction commits
        assert reader.count("questionnaire_answers") == 0
    assert commit_staged(run_store(run), paths) == len(paths)

    with ReplayReader(run) as reader:
        assert reader.count("questionnaire_answers") == 400
        per_agent = reader.query(
            "SELECT agent_id, count(*) AS n, count(DISTINCT question_id) AS q FROM questionnaire_answers GROUP BY ALL"
        ).to_pylist()
        assert len(per_agent) == 100 and {(r["n"], r["q"]) for r in per_agent} == {(4, 4)}
        rows = reader.query("SELECT * FROM questionnaire_answers ORDER BY agent_id, question_id").to_pylist()
        assert {(r["run"], r["questionnaire_id"], r["step_index"], r["step"], r["t"]) for r in rows} == {
            ("qrun", "wellbeing", 1, 2, T)
        }
        assert all(r["parse_success"] and r["error"] is None and r["attempts"] == 1 and r["reason"] for r in rows)
        by_q: dict[str, list[dict]] = {}
        for r in rows:
            by_q.setdefault(r["question_id"], []).append(r)
        assert all(isinstance(r["value_int"], int) and 1 <= r["value_int"] <= 7 for r in by_q["happiness"])
        assert all(0.0 <= r["value_float"] <= 1.0 and r["value_int"] is None for r in by_q["trust"])
        assert all(r["value_text"] in MOODS for r in by_q["mood"])
        assert all(r["value_text"].strip() and r["value_float"] is None for r in by_q["note"])
        assert all(json.loads(r["value_json"]) == r["value_int"] for r in by_q["happiness"])
        assert len({r["value_int"] for r in by_q["happiness"]}) > 1  # answers depend on the agent
        calls = reader.query(
            "SELECT count(*) AS n, count(DISTINCT caller) AS callers, min(step) AS s, max(step) AS s2, "
            "min(prompt_name) AS p, max(prompt_name) AS p2 FROM llm_calls"
        ).to_pylist()[0]
        assert calls == {"n": 100, "callers": 100, "s": 2, "s2": 2, "p": "questionnaire.answer", "p2": "questionnaire.answer"}
        spans = reader.query("SELECT count(*) AS n FROM spans WHERE name = 'agent.questionnaire'").column("n")[0].as_py()
        assert spans == 100

    artifact = questionnaire_artifact(1, "wellbeing")
    assert artifact == "artifacts/questionnaire-001-wellbeing.json"
    doc = json.loads((run / artifact).read_text())
    assert doc["ok"] == 400 and len(doc["answers"]) == 400 and doc["agents_answered"] == 100
    # Interviewing must not change the subject: every workspace file is byte-for-byte as before.
    assert _digest(run / "agents") == before


async def test_a_broken_agent_fails_its_own_answers_and_the_batch_goes_on(dask_client, tmp_path):
    run = tmp_path / "run"
    _make_agents(run, range(3))
    (workspace_path(run / "agents", 1) / "config.json").write_text("{not json")

    response, paths = await distribute_questionnaire(
        dask_client, SURVEY, [0, 1, 2, 404], proxy=_proxy(run), txn=1, step_count=0, step_index=0, t=T,
        batch_size=4, max_workers=None,
    )
    commit_staged(run_store(run), paths)

    by_agent = response.by_agent()
    assert all(a.parse_success for a in by_agent[0] + by_agent[2])
    assert all(not a.parse_success and a.value is None and "corrupt" in a.error for a in by_agent[1])
    assert all(not a.parse_success and "does not exist" in a.error for a in by_agent[404])
    with ReplayReader(run) as reader:
        failed = reader.query(
            "SELECT agent_id, count(*) AS n FROM questionnaire_answers "
            "WHERE NOT parse_success AND value_json IS NULL AND attempts = 0 GROUP BY ALL ORDER BY agent_id"
        ).to_pylist()
        assert failed == [{"agent_id": 1, "n": 4}, {"agent_id": 404, "n": 4}]
        assert reader.count("questionnaire_answers") == 16


async def test_running_out_of_budget_stops_the_questionnaire_without_failure_rows(dask_client, tmp_path):
    run = tmp_path / "run"
    _make_agents(run, range(4))

    with pytest.raises(BudgetExhaustedError, match="2 agents not asked"):
        await distribute_questionnaire(
            dask_client, SURVEY, [0, 1, 2, 3], proxy=_proxy(run), txn=3, step_count=0, step_index=0, t=T,
            batch_size=2, max_workers=None, budget=Allowance(calls=2),
        )

    # Each batch had one call: one agent answered, the other was stopped and wrote no row at all.
    staged = sorted((run / "replay" / "questionnaire_answers").iterdir())
    assert [staged_txn(p.name)[1] for p in staged] == [3, 3]
    rows = [r for p in staged for r in pq.read_table(p).to_pylist()]
    assert len(rows) == 8 and all(r["parse_success"] for r in rows)
    assert not run_store(run).exists(questionnaire_artifact(0, "wellbeing"))
    assert not run_store(run).exists(staged_key(questionnaire_artifact(0, "wellbeing"), 3))
