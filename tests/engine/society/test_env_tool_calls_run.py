"""``env_tool_calls`` in a real run: one row per tool call the env actor ran, committed with its tick."""

from __future__ import annotations

from pathlib import Path

from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader

AGENTS = 12
TICKS = 3


def _spec() -> object:
    return parse_spec({
        "name": "env-tool-calls",
        "seed": 3,
        "llm": {"default": {"model": "sim/default"}},
        "population": [{"count": AGENTS, "profile_template": {"name": "P{i}"},
                        "config": {"tools": ["ask_env"], "max_react_turns": 2}}],
        "environment": {"modules": [{"type": "MessagingSpace"}], "router": "codegen"},
        "steps": [{"type": "run", "num_steps": TICKS, "tick": 600}],
        "batch_size": 4,
    })


async def test_env_tool_calls_has_one_row_per_tool_call_of_the_run(shell, tmp_path: Path) -> None:
    run = tmp_path / "run"
    summary = await run_experiment(_spec(), run, shell)
    assert summary.status == "completed", summary.error

    with ReplayReader(run) as reader:
        calls = reader.query("SELECT * FROM env_tool_calls").to_pylist()
        # the actor's env.ask spans: one per request it served, each naming its op
        served = {r["span_id"]: r for r in reader.query(
            "SELECT span_id, trace_id, attrs ->> 'op' AS op, (attrs ->> 'agent_id')::BIGINT AS agent_id "
            "FROM spans WHERE name = 'env.ask' AND attrs ->> 'op' IS NOT NULL"
        ).to_pylist()}
        observes = reader.query(
            "SELECT step, count(*) AS n FROM actions GROUP BY step ORDER BY step"
        ).to_pylist()
        delivered = {(r["step"], r["kind"]): r["n"] for r in reader.query(
            "SELECT step, kind, count(*) AS n FROM messages GROUP BY ALL"
        ).to_pylist()}

    # Every row ran inside a request the actor served, in that request's trace, for that request's agent.
    assert calls and all(c["span_id"] in served for c in calls)
    assert all(c["trace_id"] == served[c["span_id"]]["trace_id"] for c in calls)
    assert all(c["agent_id"] == served[c["span_id"]]["agent_id"] for c in calls)
    # One shard per step: its rows are numbered 0..n-1 once (a step written twice would repeat numbers).
    for step in range(1, TICKS + 1):
        assert sorted(c["seq"] for c in calls if c["step"] == step) == list(range(sum(c["step"] == step for c in calls)))

    # Observations: each agent observes once a step and MessagingSpace has one observe tool, read_inbox.
    by_span: dict[str, list[dict]] = {}
    for c in calls:
        by_span.setdefault(c["span_id"], []).append(c)
    observe_spans = [s for s, r in served.items() if r["op"] == "observe"]
    assert len(observe_spans) == AGENTS * TICKS == sum(r["n"] for r in observes)
    assert all([c["tool"] for c in by_span.get(s, [])] == ["read_inbox"] for s in observe_spans)

    # Changes: every successful send / post is one message the module delivered in that step, and back.
    for step in range(1, TICKS + 1):
        for tool, kind in (("send_message", "direct"), ("post_to_group", "group")):
            rows = sum(1 for c in calls if c["step"] == step and c["tool"] == tool and c["ok"])
            assert rows == delivered.get((step, kind), 0), (step, tool)
    assert sum(delivered.values()) >= 3  # the agents did act, so the comparison above compares something
