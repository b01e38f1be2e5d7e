"""Every replay dataset of a real run carries ``run``, the run id of the driver that wrote the row."""

from __future__ import annotations

from pathlib import Path

from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.catalog import RUN_COLUMN
from engine.storage.reader import ReplayReader
from tests.engine.society.crash_support import crash_spec


def _spec() -> object:
    spec = crash_spec(ticks_before=1, ticks_after=1)
    spec["environment"]["modules"] += [
        {"type": "EconomySpace", "kwargs": {"goods": {"bread": 2.5}, "salaries": {"0": 10.0}}},
        {"type": "WeatherSpace", "kwargs": {"locations": ["park"]}},
    ]
    # a message before the first tick, whatever the agents decide: the messages dataset has a row to check
    spec["steps"].insert(0, {"type": "intervene", "calls": [
        {"tool": "send_system_message", "arguments": {"to_agent_id": 0, "content": "The park opens at nine."}}]})
    spec["steps"] += [{"type": "intervene", "instruction": "Tell every agent that the park is closed."},
                      {"type": "ask", "question": "How many agents are there?"}]
    return parse_spec(spec)


async def test_every_dataset_has_the_run_id_of_its_driver_first_and_in_every_row(shell, tmp_path: Path) -> None:
    run = tmp_path / "run"
    summary = await run_experiment(_spec(), run, shell)
    # every step ran; the simulated helper's ask may fail (it plans at random), a failure the run counts
    assert summary.status == "completed" or summary.first_error.startswith(("ask (step", "intervene (step")), summary.error

    with ReplayReader(run) as reader:
        names = reader.datasets()
        [driver] = [r["run"] for r in reader.query("SELECT DISTINCT run FROM llm_calls").to_pylist()]
        found = {}
        for name in names:
            first = reader.schema(name).columns[0]
            table = reader.query(f"SELECT run, count(*) AS n FROM {name} GROUP BY run")
            found[name] = (first, reader.query(f"SELECT * FROM {name} LIMIT 0").column_names[0], table.to_pylist())

    # Every kind of dataset is there: agent, llm, society, questionnaire, env actor, env router, env modules.
    assert {"actions", "agent_memory", "llm_calls", "transcripts", "society_queries", "questionnaire_answers",
            "env_tool_calls", "env_metrics", "codegen_cache", "env_messaging", "messages", "economy_state",
            "economy_accounts", "weather_series"} <= set(names)
    for name, (first, first_read, counts) in found.items():
        assert first == RUN_COLUMN and first_read == "run", name
        assert [c["run"] for c in counts] in ([driver], []), f"{name}: {counts}"  # one id, never NULL
    empty = sorted(name for name, (_, _, counts) in found.items() if not counts)
    assert set(empty) <= {"economy_transactions", "weather_changes"}, empty  # the others have rows to check
