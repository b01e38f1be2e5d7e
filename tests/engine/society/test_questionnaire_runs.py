"""Questionnaires fanned out in batches on the simulated LLM, read back with real DuckDB, in process (the
in-process shell); 100 agents spread over a LocalCluster's two worker processes are in ``tests/engine/society/shells/test_on_dask.py``."""

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


def make_agents(run: Path, ids: range) -> None:
    """Workspaces as AgentSociety.init creates them; some agents already have recent activity."""
    for i in ids:
        ws = workspace_path(run / "agents", i)
        PersonAgent.create(ws, agent_id=i, profile={"name": f"P{i}", "age": 20 + i % 50}, config={})
        if i % 3 == 0:
            (ws / "AGENT.json").write_text(json.dumps({"id": i, "type": "PersonAgent", "step_count": 2,
                                                       "state": {"recent": [f"met agent {i + 1} at the market"]}}))


def answer_proxy(run: Path) -> ServiceProxy:
    # Answering reads no environment, so the proxy carries none.
    return ServiceProxy(env=None, llm={"default": LLMClient(model="sim/default", seed=11)}, run_dir=run, run_id="qrun")


def digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


async def test_a_broken_agent_fails_its_own_answers_and_the_batch_goes_on(shell, tmp_path):
    run = tmp_path / "run"
    make_agents(run, range(3))
    (workspace_path(run / "agents", 1) / "config.json").write_text("{not json")

    response, paths = await distribute_questionnaire(
        shell, SURVEY, [0, 1, 2, 404], proxy=answer_proxy(run), txn=1, step_count=0, step_index=0, t=T,
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


async def test_running_out_of_budget_stops_the_questionnaire_without_failure_rows(shell, tmp_path):
    run = tmp_path / "run"
    make_agents(run, range(4))

    with pytest.raises(BudgetExhaustedError, match="2 agents not asked"):
        await distribute_questionnaire(
            shell, SURVEY, [0, 1, 2, 3], proxy=answer_proxy(run), txn=3, step_count=0, step_index=0, t=T,
            batch_size=2, max_workers=None, budget=Allowance(calls=2),
        )

    # Each batch had one call: one agent answered, the other was stopped and wrote no row at all.
    staged = sorted((run / "replay" / "questionnaire_answers").iterdir())
    assert [staged_txn(p.name)[1] for p in staged] == [3, 3]
    rows = [r for p in staged for r in pq.read_table(p).to_pylist()]
    assert len(rows) == 8 and all(r["parse_success"] for r in rows)
    assert not run_store(run).exists(questionnaire_artifact(0, "wellbeing"))
    assert not run_store(run).exists(staged_key(questionnaire_artifact(0, "wellbeing"), 3))
