"""Steps on a stored run: a finished run extended with a questionnaire and an ask step runs only the new
steps, each its own transaction, into the same datasets; the stored spec becomes the extended one."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.cluster_options import IN_PROCESS
from engine.errors import SpecError
from engine.society.run.extend import extend_spec, is_extension, load_steps
from engine.society.run.runner import run_experiment
from engine.spec import AskStep, QuestionnaireStep, RunStep, parse_spec
from engine.storage.reader import ReplayReader

QUESTIONNAIRE = {
    "type": "questionnaire", "questionnaire_id": "later", "target_agent_ids": [1, 2],
    "questions": [{"id": "trust", "prompt": "Trust in neighbours (0-10)?", "response_type": "integer", "min": 0, "max": 10}],
}


def _spec(**changes: object):
    data = {
        "name": "extend", "seed": 3, "llm": {"default": {"model": "sim/default"}},
        "agents": [{"id": i, "profile": {"name": f"P{i}"}, "config": {"max_react_turns": 2}} for i in range(3)],
        "environment": {"modules": [{"type": "MessagingSpace"}]},
        "steps": [{"type": "run", "num_steps": 1, "tick": 600}],
        **changes,
    }
    return parse_spec(data)


def test_extend_spec_appends_steps_and_refuses_run_steps_unknown_agents_and_sweeps() -> None:
    stored = _spec()
    extended = extend_spec(stored, [QuestionnaireStep.model_validate(QUESTIONNAIRE), AskStep(question="Who spoke?")])
    assert [s.type for s in extended.steps] == ["run", "questionnaire", "ask"]
    assert is_extension(stored, extended) and not is_extension(extended, stored) and not is_extension(stored, stored)
    assert not is_extension(stored, extended.model_copy(update={"seed": 4}))
    with pytest.raises(SpecError, match="not 'run'") as refused:
        extend_spec(stored, [AskStep(question="x"), RunStep(num_steps=1)])
    assert refused.value.path == "steps.1.type"
    with pytest.raises(SpecError, match=r"there is no agent 7") as unknown:
        extend_spec(stored, [QuestionnaireStep.model_validate({**QUESTIONNAIRE, "target_agent_ids": [0, 7]})])
    assert unknown.value.path == "steps.0.target_agent_ids.1"
    with pytest.raises(SpecError, match="sweep"):
        extend_spec(_spec(sweep={"replications": 2}), [AskStep(question="x")])
    with pytest.raises(SpecError, match="at least one step"):
        extend_spec(stored, [])


def test_load_steps_reads_a_list_or_a_steps_mapping_and_names_the_bad_field(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(yaml.safe_dump([QUESTIONNAIRE]))
    (tmp_path / "b.json").write_text(json.dumps({"steps": [{"type": "ask", "question": "Why?"}]}))
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"steps": [{"type": "ask"}]}))
    assert [s.type for s in load_steps(tmp_path / "a.yaml")] == ["questionnaire"]
    assert [s.type for s in load_steps(tmp_path / "b.json")] == ["ask"]
    with pytest.raises(SpecError, match="steps.0.ask.question") as bad:
        load_steps(tmp_path / "c.yaml")
    assert bad.value.path.startswith("steps.0")


async def test_a_questionnaire_then_an_ask_on_a_finished_run_add_rows_and_keep_the_old_ones(shell, tmp_path: Path) -> None:
    run = tmp_path / "run"
    first = await run_experiment(_spec(), run, shell)
    assert first.status == "completed", first.error
    with ReplayReader(run) as reader:
        actions_before = reader.query("SELECT * FROM actions ORDER BY agent_id").to_pylist()
        calls_before = reader.count("llm_calls")

    stored = parse_spec(json.loads((run / "SOCIETY.json").read_text())["spec"])
    extended = extend_spec(stored, [QuestionnaireStep.model_validate(QUESTIONNAIRE)])
    second = await run_experiment(extended, run, shell, resume=True)
    assert second.status == "completed", second.error
    society = json.loads((run / "SOCIETY.json").read_text())
    assert society["spec_hash"] == extended.spec_hash() and len(society["spec"]["steps"]) == 2
    status = json.loads((run / "SOCIETY_STEP.json").read_text())
    assert (status["completed_steps"], status["step_count"], status["txn"]) == (2, 1, 2)  # one tick, one questionnaire

    third = await run_experiment(extend_spec(parse_spec(society["spec"]), [AskStep(question="How many agents are there?")]),
                                 run, shell, resume=True)
    assert third.status == "completed", third.error
    with ReplayReader(run) as reader:
        assert reader.query("SELECT * FROM actions ORDER BY agent_id").to_pylist() == actions_before
        answers = reader.query("SELECT questionnaire_id, step_index, step, agent_id FROM questionnaire_answers ORDER BY agent_id")
        assert answers.to_pylist() == [
            {"questionnaire_id": "later", "step_index": 1, "step": 1, "agent_id": 1},
            {"questionnaire_id": "later", "step_index": 1, "step": 1, "agent_id": 2},
        ]
        asked = reader.query("SELECT step_index, kind FROM society_queries").to_pylist()
        assert asked == [{"step_index": 2, "kind": "ask"}]
        assert reader.count("llm_calls") > calls_before
    assert json.loads((run / "SOCIETY_STEP.json").read_text())["completed_steps"] == 3

    # The stored spec is the extended one: resuming with it is a no-op that reports the finished run.
    again = await run_experiment(parse_spec(json.loads((run / "SOCIETY.json").read_text())["spec"]), run, shell, resume=True)
    assert again.status == "completed" and json.loads((run / "SOCIETY_STEP.json").read_text())["txn"] == 3


async def test_polis_run_add_steps_runs_the_new_steps_on_the_stored_run(shell, tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert (await run_experiment(_spec(), run, shell)).status == "completed"
    (tmp_path / "steps.yaml").write_text(yaml.safe_dump({"steps": [QUESTIONNAIRE]}))
    env = {**os.environ, "POLIS_SCHEDULER": IN_PROCESS}
    polis = [sys.executable, "-m", "engine.cli", "run", "--resume", str(run), "--add-steps"]
    added = await asyncio.to_thread(subprocess.run, [*polis, str(tmp_path / "steps.yaml")], capture_output=True, text=True,
                                    timeout=180, env=env)
    assert added.returncode == 0, added.stderr
    assert "status: completed" in added.stdout
    with ReplayReader(run) as reader:
        assert reader.count("questionnaire_answers") == 2
    refused = await asyncio.to_thread(subprocess.run, [*polis, str(tmp_path / "missing.yaml")], capture_output=True, text=True,
                                      timeout=60, env=env)
    assert refused.returncode == 2 and "cannot read steps file" in refused.stderr
