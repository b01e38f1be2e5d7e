"""The transcripts and agent_memory datasets of real runs (in-process shell, sim LLM), read with DuckDB."""

from __future__ import annotations

import json

from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import RunLayout


def spec(**changes):
    data = {
        "name": "transcripts",
        "seed": 5,
        "population": [{"count": 6, "profile_template": {"name": "P{i}"}, "config": {"max_react_turns": 2}}],
        "environment": {"modules": [{"type": "MessagingSpace"}], "max_router_steps": 1},
        "steps": [
            {"type": "run", "num_steps": 2, "tick": 600},
            {"type": "questionnaire", "questionnaire_id": "mood", "title": "Mood",
             "questions": [{"id": "q1", "prompt": "How are you, 1 to 5?", "response_type": "integer"}]},
            {"type": "ask", "question": "How many agents are there?"},
        ],
        "batch_size": 4,
    }
    data.update(changes)
    return parse_spec(data)


CALLS_AND_TRANSCRIPTS = (
    "SELECT c.call_id, c.caller, c.step, c.status, t.call_id AS t_id, t.caller AS t_caller, t.step AS t_step, "
    "t.status AS t_status, t.text_dropped, t.messages, t.reply, t.tool, t.thought, t.arguments "
    "FROM llm_calls c FULL OUTER JOIN transcripts t USING (call_id) ORDER BY call_id"
)


async def test_every_llm_call_has_one_transcript_row_joined_on_its_call_id(shell, tmp_path):
    summary = await run_experiment(spec(), tmp_path / "run", shell)
    assert summary.status == "completed", summary.error

    with ReplayReader(tmp_path / "run") as reader:
        rows = reader.query(CALLS_AND_TRANSCRIPTS).to_pylist()
        ids = reader.query("SELECT count(*) AS n, count(DISTINCT call_id) AS d FROM llm_calls").to_pylist()[0]
    assert ids["n"] == ids["d"] == len(rows) == summary.llm_calls == summary.transcripts > 0
    for row in rows:
        assert (row["t_id"], row["t_caller"], row["t_step"], row["t_status"]) == (row["call_id"], row["caller"], row["step"], row["status"])
        assert row["text_dropped"] is False and json.loads(row["messages"])
    callers = {row["caller"].split(":")[0] for row in rows}
    assert {"agent", "router", "helper"} <= callers
    # Agent decisions are parsed: the tool and its arguments of each ReAct reply.
    decisions = [r for r in rows if r["caller"].startswith("agent:") and r["tool"] is not None]
    assert decisions and all(json.loads(r["reply"])["action"]["tool"] == r["tool"] for r in decisions)
    assert all(isinstance(json.loads(r["arguments"]), dict) and r["thought"] for r in decisions)
    # The questionnaire's answers are not decisions: their rows keep the reply, with no tool.
    questionnaire = [r for r in rows if "/q001/" in r["call_id"]]
    assert len(questionnaire) == 6 and all(r["tool"] is None and r["reply"] for r in questionnaire)
    assert "transcripts: " in summary.transcripts_line() and "dropped" not in summary.transcripts_line()


async def test_a_seeded_rerun_gives_the_same_call_ids(shell, tmp_path):
    small = spec(steps=[{"type": "run", "num_steps": 2, "tick": 600}])
    first = await run_experiment(small, tmp_path / "a", shell)
    second = await run_experiment(small, tmp_path / "b", shell)
    assert first.status == second.status == "completed"
    query = "SELECT call_id, caller, agent_id, prompt_name FROM llm_calls ORDER BY call_id"
    with ReplayReader(tmp_path / "a") as a, ReplayReader(tmp_path / "b") as b:
        assert a.query(query).to_pylist() == b.query(query).to_pylist()


async def test_past_the_cap_later_rows_keep_metadata_and_drop_text(shell, tmp_path):
    # One batch, one decision per agent-step and no env asks: the rows come in step order.
    population = [{"count": 4, "profile_template": {"name": "P{i}"}, "config": {"max_react_turns": 1, "tools": ["finish"]}}]
    run = tmp_path / "run"
    with_text = await run_experiment(spec(population=population, steps=[{"type": "run", "num_steps": 1, "tick": 600}]),
                                     tmp_path / "probe", shell)
    with ReplayReader(tmp_path / "probe") as reader:
        step_bytes = reader.query("SELECT sum(text_bytes) AS b FROM transcripts WHERE caller LIKE 'agent:%'").column("b")[0].as_py()
    assert with_text.status == "completed" and step_bytes > 0
    cap = step_bytes * 2  # about two ticks of text; the world description's call takes its share too
    summary = await run_experiment(
        spec(population=population, batch_size=8, steps=[{"type": "run", "num_steps": 5, "tick": 600}],
             transcripts={"max_bytes": cap}), run, shell)
    assert summary.status == "completed", summary.error

    with ReplayReader(run) as reader:
        rows = reader.query(
            "SELECT t.step, t.call_id, t.caller, t.status, t.text_bytes, t.text_dropped, t.messages, t.reply, t.tool "
            "FROM transcripts t JOIN llm_calls USING (call_id) WHERE t.caller LIKE 'agent:%' ORDER BY t.step, t.call_id"
        ).to_pylist()
        kept_bytes = reader.query("SELECT sum(text_bytes) AS b FROM transcripts WHERE NOT text_dropped").column("b")[0].as_py()
    kept = [r for r in rows if not r["text_dropped"]]
    dropped = [r for r in rows if r["text_dropped"]]
    assert kept and dropped and len(rows) == 4 * 5
    assert max(r["step"] for r in kept) <= min(r["step"] for r in dropped)
    assert all(r["messages"] and r["reply"] for r in kept)
    assert all(r["messages"] is None and r["reply"] is None and r["tool"] is None for r in dropped)
    assert all(r["call_id"] and r["caller"] and r["status"] == "ok" and r["text_bytes"] > 0 for r in dropped)
    assert kept_bytes <= cap
    assert summary.transcripts_dropped >= len(dropped)
    assert f"with text dropped past the cap of {cap} bytes" in summary.transcripts_line()
    status = json.loads(RunLayout(run).society_step_file.read_text())
    assert status["extra"]["transcripts"] == {"text_bytes": kept_bytes, "full": True}


async def test_a_cap_of_zero_keeps_metadata_only_and_transcripts_can_be_off(shell, tmp_path):
    small = [{"type": "run", "num_steps": 1, "tick": 600}]
    zero = await run_experiment(spec(steps=small, transcripts={"max_bytes": 0}), tmp_path / "zero", shell)
    off = await run_experiment(spec(steps=small, transcripts={"enabled": False}), tmp_path / "off", shell)
    assert zero.status == off.status == "completed"
    with ReplayReader(tmp_path / "zero") as reader:
        counts = reader.query("SELECT count(*) AS n, bool_and(text_dropped) AS all_dropped, count(messages) AS texts FROM transcripts").to_pylist()[0]
    assert counts == {"n": zero.llm_calls, "all_dropped": True, "texts": 0}
    with ReplayReader(tmp_path / "off") as reader:
        assert reader.count("transcripts") == 0 and reader.count("llm_calls") == off.llm_calls > 0
    assert off.transcripts_line() == "transcripts: off"


async def test_agent_memory_has_one_row_per_agent_step_with_the_steps_episodes(shell, tmp_path):
    summary = await run_experiment(spec(steps=[{"type": "run", "num_steps": 3, "tick": 600}]), tmp_path / "run", shell)
    assert summary.status == "completed", summary.error
    with ReplayReader(tmp_path / "run") as reader:
        memory = reader.query("SELECT agent_id, step, memory, todo, episodes FROM agent_memory ORDER BY agent_id, step").to_pylist()
        actions = reader.query("SELECT agent_id, step FROM actions ORDER BY agent_id, step").to_pylist()
    assert [(r["agent_id"], r["step"]) for r in memory] == [(r["agent_id"], r["step"]) for r in actions]
    # The rows' episodes are exactly the workspace's episode file, step by step.
    for agent_id in {r["agent_id"] for r in memory}:
        lines = (RunLayout(tmp_path / "run").agents / f"agent_{agent_id:04d}" / "memory" / "episodes.jsonl")
        stored = [json.loads(line) for line in lines.read_text().splitlines()] if lines.exists() else []
        from_rows = [e for r in memory if r["agent_id"] == agent_id for e in json.loads(r["episodes"])]
        assert from_rows == stored


async def test_a_resumed_run_continues_the_committed_byte_count(shell, tmp_path):
    population = [{"count": 4, "profile_template": {"name": "P{i}"}, "config": {"max_react_turns": 1, "tools": ["finish"]}}]
    steps = [{"type": "run", "num_steps": 4, "tick": 600}]
    run = tmp_path / "run"
    cap = 12_000  # about two and a half ticks of this population's text
    stopped = await run_experiment(spec(population=population, batch_size=8, steps=steps, transcripts={"max_bytes": cap},
                                        budget={"max_calls": 9}), run, shell)
    assert stopped.status == "budget_exhausted"
    before = json.loads(RunLayout(run).society_step_file.read_text())["extra"]["transcripts"]
    assert before["text_bytes"] > 0 and before["full"] is False

    resumed = await run_experiment(spec(population=population, batch_size=8, steps=steps, transcripts={"max_bytes": cap},
                                        budget={"max_calls": 100}), run, shell, resume=True)
    assert resumed.status == "completed", resumed.error
    with ReplayReader(run) as reader:
        kept = reader.query("SELECT coalesce(sum(text_bytes), 0) AS b FROM transcripts WHERE NOT text_dropped").column("b")[0].as_py()
        dropped = reader.query("SELECT count(*) AS n FROM transcripts WHERE text_dropped").column("n")[0].as_py()
    after = json.loads(RunLayout(run).society_step_file.read_text())["extra"]["transcripts"]
    assert after == {"text_bytes": kept, "full": True} and kept <= cap and dropped > 0
    assert kept > before["text_bytes"]
