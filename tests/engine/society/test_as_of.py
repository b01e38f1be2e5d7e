"""Interviews as of a kept tick: a questionnaire or ask step with ``as_of_step: K`` on a finished run answers
from the agents as tick K left them, and changes nothing stored but its own rows."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import TypeAdapter

from engine.agent.service_proxy import ServiceProxy
from engine.cluster_options import IN_PROCESS
from engine.env.actor import EnvRouterConfig, build_router
from engine.errors import ForkError, SpecError
from engine.llm.client import LLMClient
from engine.llm.meter import CallRecord
from engine.society.experimenter.interview import ask_agents
from engine.society.fork.as_of import AsOfAgents, check_as_of_steps, find_as_of
from engine.society.run.extend import extend_spec, load_steps
from engine.society.run.runner import run_experiment
from engine.society.workspaces.manifest import agent_workspace
from engine.spec import ExperimentSpec, StepSpec, parse_spec
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import RunLayout

TICKS = 4
AS_OF = 2


#: A seed whose simulated agent 0 sums up every tick: the tests that read its recent activity run with it.
SUMS_UP = 6


def _spec_data(**changes: Any) -> dict[str, Any]:
    return {
        "name": "asof", "seed": 5, "start_time": "2026-03-02T08:00:00",
        "llm": {"default": {"model": "sim/default"}},
        "agents": [{"id": i, "profile": {"name": f"P{i}"}, "config": {"max_react_turns": 2}} for i in range(3)],
        "environment": {"modules": [{"type": "MessagingSpace"}]},
        # the run's own questionnaire registers its datasets, so the as-of one adds shards only
        "steps": [{"type": "run", "num_steps": 1, "tick": 600}, _questionnaire("during"),
                  {"type": "run", "num_steps": TICKS - 1, "tick": 600}],
        **changes,
    }


def _questionnaire(qid: str, as_of_step: int | None = None, **changes: Any) -> dict[str, Any]:
    return {"type": "questionnaire", "questionnaire_id": qid, "as_of_step": as_of_step, **changes,
            "questions": [{"id": "mood", "prompt": "Mood (1-5)?", "response_type": "integer", "min": 1, "max": 5}]}


def _stored_spec(run: Path) -> ExperimentSpec:
    return parse_spec(json.loads(RunLayout(run).society_file.read_text())["spec"])


def _hashes(run: Path) -> dict[str, str]:
    return {str(p.relative_to(run)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run.rglob("*")) if p.is_file() and not p.is_symlink()}


#: what a step on a stored run may rewrite: the status records, the manifest and the driver's lease (new files aside)
_REWRITTEN = {"SOCIETY.json", "SOCIETY_STEP.json", "MANIFEST.json", "LEASE.json"}


#: where a step's new files go: its shards, spans and artifact, its history record, its cached responses
_STEP_OUTPUTS = ("replay/", "trace/", "artifacts/", "history/", "llm_cache/")


def _changed(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """Files that existed before and changed, and new files outside the step's own outputs."""
    changed = [name for name, digest in before.items() if name not in _REWRITTEN and after.get(name) != digest]
    added = [name for name in after if name not in before and name not in _REWRITTEN
             and not name.startswith(_STEP_OUTPUTS)]
    return sorted(changed + added)


async def _finished_run(run: Path, shell: Any, **changes: Any) -> None:
    summary = await run_experiment(parse_spec(_spec_data(**changes)), run, shell)
    assert summary.status == "completed", summary.error


def _recent_lines(reader: ReplayReader, agent_id: int) -> dict[int, str]:
    """Each tick's line in the agent's "recent activity" (its step summary at the tick's end time)."""
    rows = reader.query(f"SELECT step, t, summary FROM actions WHERE agent_id = {agent_id} AND summary IS NOT NULL "
                        "ORDER BY step").to_pylist()
    return {row["step"]: f"- {row['t'].isoformat()}: {row['summary']}" for row in rows}


def test_check_as_of_steps_refuses_a_tick_after_the_ones_before_the_step() -> None:
    steps = parse_spec(_spec_data(steps=[
        {"type": "run", "num_steps": 2, "tick": 600}, _questionnaire("a", 2), {"type": "ask", "question": "?", "as_of_step": 0},
        _questionnaire("b", 3), {"type": "run", "num_steps": 1, "tick": 600},
    ])).steps
    with pytest.raises(SpecError, match="tick 3 is not committed") as refused:
        check_as_of_steps(steps)
    assert refused.value.path == "steps.3.as_of_step"
    check_as_of_steps(steps[:3])
    check_as_of_steps(steps[3:], ticks_before=3, first_index=3)

    stored = parse_spec(_spec_data())
    with pytest.raises(SpecError) as extended:
        extend_spec(stored, load_steps_from([{"type": "ask", "question": "?"}, _questionnaire("late", TICKS + 1)]))
    assert extended.value.path == "steps.1.as_of_step"
    assert [s.type for s in extend_spec(stored, load_steps_from([_questionnaire("ok", TICKS)])).steps][-1] == "questionnaire"


def load_steps_from(steps: list[dict[str, Any]]) -> list[StepSpec]:
    return TypeAdapter(list[StepSpec]).validate_python(steps)


async def test_a_spec_reading_a_tick_in_its_future_fails_before_it_starts(shell, tmp_path: Path) -> None:
    spec = parse_spec(_spec_data(steps=[{"type": "run", "num_steps": 1, "tick": 600}, _questionnaire("early", 2)]))
    summary = await run_experiment(spec, tmp_path / "run", shell)
    assert summary.status == "failed"
    assert summary.error is not None and "steps.1.as_of_step" in summary.error
    assert not (tmp_path / "run").exists()


async def test_a_spec_s_own_as_of_step_reads_an_earlier_tick_mid_run(shell, tmp_path: Path) -> None:
    run = tmp_path / "run"
    await _finished_run(run, shell, steps=[{"type": "run", "num_steps": 2, "tick": 600}, _questionnaire("back", 1),
                                           {"type": "run", "num_steps": 1, "tick": 600}], seed=SUMS_UP)
    with ReplayReader(run) as reader:
        answers = reader.query("SELECT DISTINCT step, as_of_step FROM questionnaire_answers").to_pylist()
        lines = _recent_lines(reader, 0)
        (prompt,) = [json.loads(r["messages"])[0]["content"] for r in reader.query(
            "SELECT messages FROM transcripts WHERE agent_id = 0 AND call_id LIKE '2/q001/%'").to_pylist()]
    assert answers == [{"step": 2, "as_of_step": 1}]
    assert lines[1] in prompt and lines[2] not in prompt
    assert not RunLayout(run).scratch.exists()


async def test_an_as_of_questionnaire_answers_from_tick_k_and_changes_nothing_stored(shell, tmp_path: Path) -> None:
    run = tmp_path / "run"
    await _finished_run(run, shell)
    before = _hashes(run)
    status_before = json.loads(RunLayout(run).society_step_file.read_text())

    extended = extend_spec(_stored_spec(run), load_steps_from([_questionnaire("then", AS_OF), _questionnaire("now")]))
    summary = await run_experiment(extended, run, shell, resume=True)
    assert summary.status == "completed", summary.error

    after = _hashes(run)
    assert _changed(before, after) == []  # agents/, env/, replay shards, history/, cache: same bytes
    assert not RunLayout(run).scratch.exists()
    status = json.loads(RunLayout(run).society_step_file.read_text())
    assert (status["step_count"], status["txn"], status["completed_steps"]) == (TICKS, status_before["txn"] + 2, 5)
    assert status["env_snapshot"] == status_before["env_snapshot"]

    with ReplayReader(run) as reader:
        answers = reader.query("SELECT questionnaire_id, step_index, step, as_of_step, t, agent_id, parse_success "
                               "FROM questionnaire_answers WHERE step_index >= 3 ORDER BY step_index, agent_id").to_pylist()
        tick_ends = {r["step"]: r["t"] for r in reader.query("SELECT DISTINCT step, t FROM actions").to_pylist()}
        assert [(a["questionnaire_id"], a["step"], a["as_of_step"], a["t"]) for a in answers] == (
            [("then", TICKS, AS_OF, tick_ends[AS_OF])] * 3 + [("now", TICKS, None, tick_ends[TICKS])] * 3)
        assert all(a["parse_success"] for a in answers)
        during = reader.query("SELECT DISTINCT as_of_step FROM questionnaire_answers WHERE step_index = 1").to_pylist()
        assert during == [{"as_of_step": None}]

        # What each agent was given: its recent activity as of tick K, not what it did afterwards.
        compared = 0
        for agent_id in range(3):
            lines = _recent_lines(reader, agent_id)
            # the whole prompt: the time and recent activity come after the fixed system message
            prompts = {row["call_id"].split("/")[1]: "\n".join(m["content"] for m in json.loads(row["messages"])) for row in reader.query(
                f"SELECT call_id, messages FROM transcripts WHERE agent_id = {agent_id} AND call_id LIKE '{TICKS}/q00%'"
            ).to_pylist()}
            then, now = prompts["q003"], prompts["q004"]
            assert f"Current simulated time: {tick_ends[AS_OF].isoformat()}" in then
            for step, line in lines.items():
                assert (line in then) == (step <= AS_OF), (agent_id, step, then)
            later = [line for step, line in lines.items() if step > AS_OF]
            compared += len(later)
            assert all(line in now for line in later[-1:])  # the ordinary questionnaire does see the later ticks
        assert compared > 0  # the agents did something after tick K that the as-of answers must not see


async def test_an_as_of_ask_records_its_tick_and_changes_nothing_stored(shell, tmp_path: Path) -> None:
    run = tmp_path / "run"
    await _finished_run(run, shell)
    before = _hashes(run)
    # With this seed the helper's plans call current_time, then ask_env (read-only, on the env as of tick 1).
    questions = [{"type": "ask", "question": "Ask every agent how their day went.", "as_of_step": 1},
                 {"type": "ask", "question": "What do agents 0 and 1 say about their mood?", "as_of_step": 1}]
    summary = await run_experiment(extend_spec(_stored_spec(run), load_steps_from(questions)), run, shell, resume=True)
    assert summary.status == "completed", summary.error
    assert _changed(before, _hashes(run)) == []
    assert not RunLayout(run).scratch.exists()
    with ReplayReader(run) as reader:
        rows = reader.query("SELECT step, as_of_step, t, status, steps_json FROM society_queries ORDER BY step_index").to_pylist()
        tick_one = reader.query("SELECT DISTINCT t FROM actions WHERE step = 1").to_pylist()[0]["t"]
        assert [(r["step"], r["as_of_step"], r["t"], r["status"]) for r in rows] == [(TICKS, 1, tick_one, "ok")] * 2
        tools = [{step["tool"]: step["result"] for step in json.loads(r["steps_json"])} for r in rows]
        assert tools[0]["current_time"] == tick_one.isoformat()  # the helper's clock is tick 1's
        assert "ask_env" in tools[1]
        # Agents it interviews (if its plan does) see tick 1's time: they are its as-of copies.
        interviewed = reader.query("SELECT messages FROM transcripts WHERE call_id LIKE '%/ask-00_/agent:%'").to_pylist()
        for message in interviewed:
            assert f"Current simulated time: {tick_one.isoformat()}" in message["messages"]


async def test_a_tick_the_run_no_longer_keeps_is_refused_and_nothing_changes(shell, tmp_path: Path) -> None:
    run = tmp_path / "run"
    await _finished_run(run, shell, snapshots={"keep": 0})
    before = _hashes(run)
    with pytest.raises(ForkError, match="snapshots.keep"):
        find_as_of(run, 1, ticks_done=TICKS, through_txn=TICKS + 1, agent_ids=[0, 1, 2], step_index=3)
    summary = await run_experiment(extend_spec(_stored_spec(run), load_steps_from([_questionnaire("gone", 1)])), run,
                                   shell, resume=True)
    assert summary.status == "failed"
    assert summary.error is not None and "ForkError" in summary.error and "snapshots.keep" in summary.error
    assert _hashes(run) == before  # refused before the lease: not even the status changed
    # The last tick is the workspaces themselves: always kept.
    latest = await run_experiment(extend_spec(_stored_spec(run), load_steps_from([_questionnaire("last", TICKS)])), run,
                                  shell, resume=True)
    assert latest.status == "completed", latest.error
    assert not RunLayout(run).scratch.exists()


async def test_the_as_of_copies_of_a_dir_run_go_when_the_step_fails(shell, tmp_path: Path) -> None:
    run = tmp_path / "run"
    await _finished_run(run, shell, storage={"workspaces": "dir"})
    at = find_as_of(run, AS_OF, ticks_done=TICKS, through_txn=TICKS + 1, agent_ids=[0, 1, 2])
    assert (at.step, at.txn) == (AS_OF, AS_OF + 1)  # tick 1, the questionnaire, tick 2
    with pytest.raises(RuntimeError, match="the step failed"), AsOfAgents(run, at, txn=99) as agents:
        root = agents.source([0, 2]).folders
        assert root is not None and sorted(p.name for p in root.iterdir()) == ["agent_0000", "agent_0002"]
        raise RuntimeError("the step failed")
    assert not RunLayout(run).scratch.exists()


async def test_a_packed_run_is_read_as_of_a_tick_from_its_packs_with_no_copy(shell, tmp_path: Path) -> None:
    run = tmp_path / "run"
    await _finished_run(run, shell)
    at = find_as_of(run, AS_OF, ticks_done=TICKS, through_txn=TICKS + 1, agent_ids=[0, 2])
    with AsOfAgents(run, at, txn=99) as agents:
        source = agents.source([0, 2])
        assert source.folders is None and source.packs is not None and not RunLayout(run).scratch.exists()
        then = source.opener()(0)
        assert then is not None and then.read_text("AGENT.json") != agent_workspace(run, 0).read_text("AGENT.json")


async def test_polis_run_add_steps_takes_an_as_of_questionnaire(shell, tmp_path: Path) -> None:
    run = tmp_path / "run"
    await _finished_run(run, shell)
    before = _hashes(run)
    env = {**os.environ, "POLIS_SCHEDULER": IN_PROCESS}  # the CLI runs the added steps in its own process
    polis = [sys.executable, "-m", "engine.cli", "run", "--resume", str(run), "--add-steps"]
    (tmp_path / "late.yaml").write_text(yaml.safe_dump({"steps": [_questionnaire("late", TICKS + 3)]}))
    refused = await asyncio.to_thread(subprocess.run, [*polis, str(tmp_path / "late.yaml")], capture_output=True, text=True,
                                      timeout=120, env=env)
    assert refused.returncode != 0 and "steps.0.as_of_step" in refused.stderr, refused.stderr
    assert _hashes(run) == before

    steps = [_questionnaire("cli", AS_OF, target_agent_ids=[1]), _questionnaire("start", 0, target_agent_ids=[2])]
    (tmp_path / "steps.yaml").write_text(yaml.safe_dump({"steps": steps}))
    assert [s.as_of_step for s in load_steps(tmp_path / "steps.yaml")] == [AS_OF, 0]
    added = await asyncio.to_thread(subprocess.run, [*polis, str(tmp_path / "steps.yaml")], capture_output=True, text=True,
                                    timeout=180, env=env)
    assert added.returncode == 0, added.stderr
    assert "status: completed" in added.stdout
    assert _changed(before, _hashes(run)) == []
    with ReplayReader(run) as reader:
        rows = reader.query("SELECT questionnaire_id, agent_id, as_of_step, t, parse_success FROM questionnaire_answers "
                            "WHERE step_index >= 3 ORDER BY step_index").to_pylist()
        tick_k = reader.query(f"SELECT DISTINCT t FROM actions WHERE step = {AS_OF}").to_pylist()[0]["t"]
    start = parse_spec(_spec_data()).start_time
    assert rows == [{"questionnaire_id": "cli", "agent_id": 1, "as_of_step": AS_OF, "t": tick_k, "parse_success": True},
                    {"questionnaire_id": "start", "agent_id": 2, "as_of_step": 0, "t": start, "parse_success": True}]


async def test_agents_interviewed_as_of_tick_k_are_given_their_state_of_tick_k(shell, tmp_path: Path) -> None:
    # The helper (sim/default) plans its own tools, so the interview an as-of ask makes is checked here directly.
    run = tmp_path / "run"
    await _finished_run(run, shell, seed=SUMS_UP)
    before = _hashes(run)
    at = find_as_of(run, 1, ticks_done=TICKS, through_txn=TICKS + 1, agent_ids=[0])
    router = build_router(EnvRouterConfig(modules=(("MessagingSpace", {}),), router="react"))
    await router.init(at.t, [0, 1, 2])
    proxy = ServiceProxy(env=router, llm={"default": LLMClient(model="sim/default", seed=5)}, run_dir=run)
    then: list[CallRecord] = []
    now: list[CallRecord] = []
    with AsOfAgents(run, at, txn=99) as agents:
        await ask_agents(run, proxy, [0], "How was your day?", at.t, records=then, agents=agents.source([0]))
    await ask_agents(run, proxy, [0], "How was your day?", at.t, records=now)
    assert _hashes(run) == before and not RunLayout(run).scratch.exists()
    with ReplayReader(run) as reader:
        lines = _recent_lines(reader, 0)
    then_prompt, now_prompt = (records[0].messages[-2]["content"] for records in (then, now))  # recent activity: before the question
    assert lines[1] in then_prompt and lines[1] in now_prompt
    later = [line for step, line in lines.items() if step > 1]
    assert later and not any(line in then_prompt for line in later)
    assert any(line in now_prompt for line in later)
