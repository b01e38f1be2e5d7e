"""Honest ends: agent errors make a run completed_with_errors or failed, never plain completed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from engine.cluster_options import IN_PROCESS
from engine.run_status import RunStatus
from engine.society.run.outcome import RunTally, judge, read_run_tally
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader


def tally(**changes) -> RunTally:
    values = {"action_rows": 100, "agent_steps": 100, "errors": 0, "first_error": None,
              "llm_calls": 0, "input_tokens": 0, "output_tokens": 0}
    return RunTally(**{**values, **changes})


def test_a_run_without_errors_is_completed():
    assert judge(tally(), expected_agent_steps=100, max_error_rate=0.05).status is RunStatus.COMPLETED


def test_errors_within_the_rate_complete_with_errors_and_name_the_first():
    verdict = judge(tally(errors=5, first_error="step 1, agent 3: KeyError"), expected_agent_steps=100, max_error_rate=0.05)
    assert verdict.status is RunStatus.COMPLETED_WITH_ERRORS
    assert "5 of 100" in verdict.error and "agent 3: KeyError" in verdict.error


def test_errors_past_the_rate_fail():
    verdict = judge(tally(errors=6, first_error="x"), expected_agent_steps=100, max_error_rate=0.05)
    assert verdict.status is RunStatus.FAILED
    assert "above max_error_rate" in verdict.error


def test_missing_action_rows_fail_whatever_the_rate():
    verdict = judge(tally(action_rows=90, agent_steps=90), expected_agent_steps=100, max_error_rate=1.0)
    assert verdict.status is RunStatus.FAILED
    assert "10 of 100 agent-steps have no action row" in verdict.error


def test_duplicate_action_rows_fail():
    verdict = judge(tally(action_rows=101), expected_agent_steps=100, max_error_rate=1.0)
    assert verdict.status is RunStatus.FAILED


def test_a_questionnaire_only_run_whose_answers_all_failed_fails():
    verdict = judge(tally(action_rows=0, agent_steps=0, answers=20, answer_errors=20,
                          first_answer_error="questionnaire q (step 0), agent 0, x: no reply"),
                    expected_agent_steps=0, max_error_rate=0.05)
    assert verdict.status is RunStatus.FAILED
    assert "20 of 20 questionnaire answers have no valid value (100.0% of all)" in verdict.error
    assert verdict.error.endswith("first: questionnaire q (step 0), agent 0, x: no reply")


def test_answers_and_consultations_share_the_rate_with_agent_steps():
    # 2 failed answers and 1 failed ask over 100 agent-steps + 40 answers + 2 asks: 3 of 142, within 5%.
    within = tally(answers=40, answer_errors=2, queries=2, query_errors=1, first_query_error="ask (step 2): no plan")
    verdict = judge(within, expected_agent_steps=100, max_error_rate=0.05)
    assert verdict.status is RunStatus.COMPLETED_WITH_ERRORS
    assert verdict.error.startswith("2 of 40 questionnaire answers have no valid value; 1 of 2 ask or intervene steps failed (2.1% of all)")
    assert within.failures == 3 and within.first_failure == "ask (step 2): no plan"
    past = judge(within, expected_agent_steps=100, max_error_rate=0.02)
    assert past.status is RunStatus.FAILED
    assert tally(answers=40).failures == 0 and judge(tally(answers=40), expected_agent_steps=100,
                                                      max_error_rate=0.0).status is RunStatus.COMPLETED


def rule_spec(bad_agents: int, *, agents: int = 10, **changes) -> dict:
    """Rule-based agents calling a tool directly (no LLM); ``bad_agents`` of them address their message to no
    agent id, so the tool refuses every one of their steps (an isolated agent error, not a spec error)."""
    def rule(i: int) -> dict:
        to = "nobody" if i < bad_agents else (i + 1) % agents
        return {"rule": {"rule": "always_cooperate", "tool": "send_message",
                         "arguments": {"to_agent_id": to, "content": "I {label} in round {round}"}}}

    spec = {
        "name": "outcome",
        "seed": 2,
        "agents": [{"id": i, "type": "RuleBasedAgent", "profile": {"name": f"R{i}"}, "config": rule(i)} for i in range(agents)],
        "environment": {"modules": [{"type": "MessagingSpace"}], "router": "react", "max_router_steps": 1},
        "steps": [{"type": "run", "num_steps": 2, "tick": 600}],
        "batch_size": 4,
    }
    return {**spec, **changes}


async def test_agent_errors_within_the_rate_end_completed_with_errors(shell, tmp_path):
    summary = await run_experiment(parse_spec(rule_spec(1, max_error_rate=0.2)), tmp_path / "run", shell)
    assert summary.status == RunStatus.COMPLETED_WITH_ERRORS, summary.error
    assert summary.errors == 2  # one agent, two ticks
    assert summary.first_error.startswith("step 1, agent 0: played cooperate in round 1") and "bad arguments" in summary.first_error
    assert json.loads((tmp_path / "run" / "SOCIETY_STEP.json").read_text())["status"] == "completed_with_errors"


async def test_agent_errors_past_the_rate_fail_the_run(shell, tmp_path):
    summary = await run_experiment(parse_spec(rule_spec(1)), tmp_path / "run", shell)  # 10% > 5%
    assert summary.status == RunStatus.FAILED
    assert "above max_error_rate 5.0%" in summary.error
    assert summary.errors == 2


async def test_summary_llm_calls_count_every_row_of_llm_calls(shell, tmp_path):
    spec = {
        "name": "calls", "seed": 4,
        "population": [{"count": 4, "config": {"max_react_turns": 2}}],
        "environment": {"modules": [{"type": "MessagingSpace"}], "max_router_steps": 1},
        "steps": [
            {"type": "run", "num_steps": 1, "tick": 600},
            {"type": "questionnaire", "questionnaire_id": "q1", "questions": [{"id": "mood", "prompt": "How do you feel?", "response_type": "text"}]},
            {"type": "ask", "question": "How many agents are there?"},
        ],
        "batch_size": 2,
    }
    summary = await run_experiment(parse_spec(spec), tmp_path / "run", shell)
    assert summary.status == RunStatus.COMPLETED, summary.error
    with ReplayReader(tmp_path / "run") as reader:
        rows = reader.count("llm_calls")
        callers = {r["caller"].split(":")[0] for r in reader.query("SELECT DISTINCT caller FROM llm_calls").to_pylist()}
    assert summary.llm_calls == rows
    assert len(callers) >= 2  # agents plus the router, questionnaire or helper: not only the agents' tick calls
    assert read_run_tally(tmp_path / "run").llm_calls == rows


@pytest.mark.parametrize(("bad", "rate", "code", "status"), [(1, 0.05, 1, "failed"), (1, 0.5, 0, "completed_with_errors")])
def test_cli_exit_code_and_summary_for_agent_errors(tmp_path: Path, bad, rate, code, status):
    (tmp_path / "spec.yaml").write_text(yaml.safe_dump(rule_spec(bad, agents=4, max_error_rate=rate)))
    env = {**os.environ, "POLIS_SCHEDULER": IN_PROCESS}  # the CLI's outcome, not a cluster's: no LocalCluster to start
    run = subprocess.run([sys.executable, "-m", "engine.cli", "run", str(tmp_path / "spec.yaml"), "--run-dir", str(tmp_path / "run")],
                         capture_output=True, text=True, timeout=180, env=env)
    assert run.returncode == code, run.stdout + run.stderr
    assert f"status: {status}\n" in run.stdout
    assert "errors: 2  first: step 1, agent 0: played cooperate" in run.stdout
