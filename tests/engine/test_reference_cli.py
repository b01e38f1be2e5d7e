"""The reference system's canonical files run end to end through ``polis run --config --steps`` (in process: no cluster)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from pathlib import Path

from engine.cluster_options import IN_PROCESS
from engine.llm.sim.process import sim_llm_process
from engine.storage.reader import ReplayReader

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "reference"
MIXED = EXAMPLE / "modules"


def _polis_run(config: Path, steps: Path, run: Path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTSOCIETY_", "POLIS_"))}
    return subprocess.run(
        [sys.executable, "-m", "engine.cli", "run", "--config", str(config), "--steps", str(steps), "--run-dir", str(run)],
        capture_output=True, text=True, timeout=240,
        env={**base, "POLIS_SCHEDULER": IN_PROCESS, **env},
    )


def _one_row_per_agent_per_tick_and_question(run: Path, agents: list[int], ticks: int, questions: list[str]) -> None:
    with ReplayReader(run) as reader:
        actions = reader.query("SELECT step, agent_id, count(*) AS n FROM actions GROUP BY ALL ORDER BY ALL").to_pylist()
        assert actions == [{"step": s, "agent_id": a, "n": 1} for s in range(1, ticks + 1) for a in agents]
        answers = reader.query("SELECT agent_id, question_id, count(*) AS n FROM questionnaire_answers "
                               "GROUP BY ALL ORDER BY ALL").to_pylist()
        assert answers == [{"agent_id": a, "question_id": q, "n": 1} for a in agents for q in sorted(questions)]


def _ran_every_step(done) -> None:
    """Every step ran; the only failures allowed are the experimenter helper's: the simulated LLM plans its ask and
    intervene steps at random and may name an agent the society does not have (a failure the run counts)."""
    status = re.search(r"^status: (\S+)", done.stdout, re.MULTILINE)
    assert status is not None, done.stdout + done.stderr[-3000:]
    if status.group(1) != "completed":
        assert status.group(1) in ("completed_with_errors", "failed"), done.stdout
        failures = re.search(r"^errors: \d+  first: (.*)$", done.stdout, re.MULTILINE)
        assert failures is not None and failures.group(1).startswith(("ask (step", "intervene (step")), done.stdout
        assert "agent-steps ended in error" not in done.stdout and "questionnaire answers" not in done.stdout, done.stdout
    else:
        assert done.returncode == 0, done.stderr[-3000:]


def test_canonical_social_space_files_run_with_names_router_summary_and_reference_outputs(tmp_path):
    run = tmp_path / "run"
    done = _polis_run(EXAMPLE / "init_config.json", EXAMPLE / "steps.yaml", run)
    _ran_every_step(done)

    _one_row_per_agent_per_tick_and_question(run, [1, 2, 3, 4], 3, ["contacts", "mood", "plan"])
    with ReplayReader(run) as reader:
        queries = reader.query("SELECT kind, step_index, step FROM society_queries ORDER BY step_index").to_pylist()
        assert queries == [{"kind": "ask", "step_index": 2, "step": 2}, {"kind": "intervene", "step_index": 3, "step": 2}]
        prompts = {row["prompt_name"]: row["n"] for row in reader.query(
            "SELECT prompt_name, count(*) AS n FROM llm_calls WHERE caller = 'router' GROUP BY ALL").to_pylist()}
        sides = reader.query("SELECT caller LIKE 'agent:%' AS agent, count(*) AS calls, sum(input_tokens)::BIGINT AS tokens "
                             "FROM llm_calls WHERE caller LIKE 'agent:%' OR caller = 'router' GROUP BY ALL").to_pylist()
    # codegen_router.final_summary_enabled: every ask_env the code answered got one summary call
    assert prompts.get("router.codegen.summary", 0) >= 1 and prompts["router.codegen.instruction"] >= 1
    society = json.loads((run / "SOCIETY.json").read_text())
    assert society["env_modules"][0]["type"] == "SimpleSocialSpace"
    assert society["env_modules"][0]["kwargs"]["agent_id_name_pairs"][0] == [1, "Alice"]

    artifacts = sorted(p.name for p in (run / "artifacts").iterdir() if "_step_" in p.name)
    assert artifacts == ["ask_step_2_20260302_100000.md", "intervene_step_3_20260302_100000.md",
                         "questionnaire_step_1_20260302_100000.json"]
    ask = (run / "artifacts" / artifacts[0]).read_text()
    assert ask.startswith("# Ask (step 2)") and "Which residents talked to each other" in ask
    survey = json.loads((run / "artifacts" / artifacts[2]).read_text())
    assert survey["questionnaire_id"] == "morning_check_in"
    assert [(r["agent_id"], sorted(r["answers"])) for r in survey["responses"]] == [
        (a, ["contacts", "mood", "plan"]) for a in (1, 2, 3, 4)]
    stats = json.loads((run / "LLM_STATS.json").read_text())
    by_side = {("agent" if row["agent"] else "router"): row for row in sides}
    assert (stats["agent"]["calls"], stats["agent"]["input_tokens"]) == (by_side["agent"]["calls"], by_side["agent"]["tokens"])
    assert (stats["router"]["calls"], stats["router"]["input_tokens"]) == (by_side["router"]["calls"], by_side["router"]["tokens"])
    assert stats["agent"]["cache_hits"] == 0 and stats["total"]["calls"] >= stats["agent"]["calls"] + stats["router"]["calls"]
    pid = json.loads((run / "pid.json").read_text())
    assert pid["status"] in ("completed", "completed_with_errors", "failed") and isinstance(pid["pid"], int)


def test_economy_weather_information_and_events_with_empty_kwargs_run_together(tmp_path):
    run = tmp_path / "run"
    done = _polis_run(MIXED / "init_config.json", MIXED / "steps.yaml", run)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "status: completed" in done.stdout
    _one_row_per_agent_per_tick_and_question(run, [1, 2], 2, ["outdoors", "spend"])
    society = json.loads((run / "SOCIETY.json").read_text())
    assert [m["type"] for m in society["env_modules"]] == ["PersonEconomySpace", "WeatherSpace", "GlobalInformationEnv", "EventSpace"]


def test_agentsociety_llm_variables_choose_the_http_llm_and_the_key_never_reaches_the_run_dir(tmp_path):
    secret = f"sk-reference-{uuid.uuid4().hex}"
    run = tmp_path / "run"
    with sim_llm_process(name="refmodel", seed=3) as server:
        done = _polis_run(EXAMPLE / "init_config.json", EXAMPLE / "steps.yaml", run, AGENTSOCIETY_LLM_API_KEY=secret,
                          AGENTSOCIETY_LLM_API_BASE=server.base_url, AGENTSOCIETY_LLM_MODEL="refmodel")
        served = server.stats()
    _ran_every_step(done)
    _one_row_per_agent_per_tick_and_question(run, [1, 2, 3, 4], 3, ["contacts", "mood", "plan"])
    llm = json.loads((run / "SOCIETY.json").read_text())["llm"]["default"]
    assert (llm["model"], llm["base_url"], llm["api_key_env"]) == ("openai/refmodel", server.base_url, "AGENTSOCIETY_LLM_API_KEY")
    with ReplayReader(run) as reader:
        calls = reader.query("SELECT count(*) AS n FROM llm_calls WHERE status = 'ok'").column("n")[0].as_py()
    assert calls > 0 and sum(served["calls"].values()) >= calls
    leaked = [p for p in run.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]
    assert leaked == []
    assert secret not in done.stdout + done.stderr


def test_a_second_run_into_the_same_directory_is_refused_and_leaves_pid_json_alone(tmp_path):
    run = tmp_path / "run"
    steps = tmp_path / "steps.yaml"
    steps.write_text("steps:\n  - type: run\n    num_steps: 1\n    tick: 600\n", encoding="utf-8")
    config = MIXED / "init_config.json"
    assert _polis_run(config, steps, run).returncode == 0
    before = (run / "pid.json").read_text()
    again = _polis_run(config, steps, run)
    assert again.returncode != 0 and "already holds a run (completed, 1 tick committed)" in again.stderr and "--overwrite" in again.stderr
    assert (run / "pid.json").read_text() == before
