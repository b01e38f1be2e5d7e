"""The reference system's init_config.json + steps.yaml, imported as a spec and run on a real LocalCluster."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from engine.agent.registry import agent_type_names
from engine.env.registry import env_module_names
from engine.errors import SpecError
from engine.reference_format import load_reference, reference_to_spec
from engine.society.run.runner import run_experiment
from engine.spec import AskStep, QuestionnaireStep, RunStep
from engine.storage.reader import ReplayReader

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "reference"
CONFIG, STEPS = EXAMPLE / "init_config.json", EXAMPLE / "steps.yaml"
RUN_ONLY = {"steps": [{"type": "run", "num_steps": 1, "tick": 600}]}


def _person(agent_id: int, **kwargs):
    return {"agent_id": agent_id, "agent_type": "PersonAgent", "kwargs": {"id": agent_id, **kwargs}}


def _config(*agents, modules=None):
    return {
        "env_modules": modules or [{"module_type": "SimpleSocialSpace", "kwargs": {}}],
        "agents": list(agents) or [_person(1, name="Ann")],
    }


def _error(init_config, steps=RUN_ONLY) -> str:
    with pytest.raises(SpecError) as caught:
        reference_to_spec(init_config, steps)
    return str(caught.value)


@pytest.fixture(scope="module")
def example():
    return load_reference(CONFIG, STEPS)


def test_example_files_convert_to_agents_profiles_configs_and_modules(example):
    assert example.name == "reference"  # the config file's folder
    assert [(a.id, a.type) for a in example.agents] == [(i, "PersonAgent") for i in (1, 2, 3, 4)]
    alice, bob, chen, dana = example.agents
    # A nested profile dict and flat profile fields both land in the profile; config keys do not.
    assert alice.profile == {"name": "Alice", "age": 28, "bio": "A software engineer who runs the neighbourhood book club."}
    assert alice.config == {"max_react_turns": 3}
    assert bob.profile == {"name": "Bob", "age": 45, "occupation": "nurse", "personality": "calm and practical"}
    assert bob.config == {"max_react_turns": 3, "tools": ["ask_env", "activate_skill", "execute_skill_script"]}
    assert chen.profile == {"name": "Chen", "age": 19, "occupation": "student", "interests": ["music", "local politics"]}
    assert chen.config == {"max_react_turns": 2, "memory": {"window_turns": 6}}
    assert dana.config == {"max_parse_attempts": 2} and "id" not in dana.profile
    [module] = example.environment.modules
    assert (module.type, module.kwargs) == ("MessagingSpace", {"groups": {"book_club": [1, 2, 3, 4]}})


def test_example_steps_map_onto_the_spec_step_models(example):
    assert example.start_time == datetime(2026, 3, 2, 8, 0, 0)
    run1, survey, run2, ask = example.steps
    assert run1 == RunStep(num_steps=2, tick=3600) and run2 == RunStep(num_steps=1, tick=1800)
    assert isinstance(survey, QuestionnaireStep)
    assert (survey.questionnaire_id, survey.title, survey.target_agent_ids) == ("mood", "Evening check-in", [1, 2, 3])
    assert [(q.id, q.response_type, q.choices) for q in survey.questions] == [
        ("mood", "choice", ["happy", "neutral", "unhappy"]), ("contacts", "integer", None)]
    assert ask == AskStep(question="Which residents talked to each other, and about what?")
    assert example.total_ticks() == 3


def test_overrides_set_the_name_and_llm():
    spec = load_reference(CONFIG, STEPS, name="book-club", llm={"default": {"model": "sim/other"}})
    assert spec.name == "book-club" and spec.llm.default.model == "sim/other"


async def test_example_runs_every_step_end_to_end_on_a_local_cluster(example, dask_client, tmp_path):
    summary = await run_experiment(example, tmp_path / "run", dask_client)

    assert summary.status == "completed", summary.error
    assert summary.ticks_done == 3 and summary.agent_steps == 12
    with ReplayReader(tmp_path / "run") as reader:
        rows = reader.query("SELECT agent_id, step FROM actions ORDER BY step, agent_id").to_pylist()
        assert [(r["step"], r["agent_id"]) for r in rows] == [(s, a) for s in (1, 2, 3) for a in (1, 2, 3, 4)]
        assert reader.query("SELECT step FROM env_messaging ORDER BY step").column("step").to_pylist() == [1, 2, 3]
        answers = reader.query("SELECT agent_id, question_id, step FROM questionnaire_answers ORDER BY ALL").to_pylist()
        assert [(a["agent_id"], a["question_id"], a["step"]) for a in answers] == [
            (agent, q, 2) for agent in (1, 2, 3) for q in ("contacts", "mood")
        ]
        asks = reader.query("SELECT kind, step_index, step FROM society_queries").to_pylist()
        assert asks == [{"kind": "ask", "step_index": 3, "step": 3}]
    workspace = json.loads((tmp_path / "run" / "agents" / "agent_0003" / "config.json").read_text())
    assert workspace["profile"]["interests"] == ["music", "local politics"]
    assert workspace["config"] == {"max_react_turns": 2, "memory": {"window_turns": 6}}
    society = json.loads((tmp_path / "run" / "SOCIETY.json").read_text())
    assert [m["type"] for m in society["env_modules"]] == ["MessagingSpace"]


def test_the_cli_runs_the_reference_files_unchanged(tmp_path):
    run = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "engine.cli", "run", "--config", str(CONFIG),
         "--steps", str(STEPS), "--run-dir", str(run)],
        capture_output=True, text=True, timeout=170, env={**os.environ, "POLIS_N_WORKERS": "1", "POLIS_DASHBOARD_ADDRESS": "127.0.0.1:0"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "status: completed" in done.stdout
    assert json.loads((run / "SOCIETY_STEP.json").read_text())["completed_steps"] == 4


def test_unknown_module_type_names_the_type_its_path_and_our_modules():
    message = _error(_config(modules=[{"module_type": "CitySpace", "kwargs": {}}]))
    assert message == (
        "init_config.json:env_modules.0.module_type: unknown environment module type 'CitySpace'; "
        f"known: {', '.join(env_module_names())}"
    )


def test_unknown_agent_type_names_the_type_its_path_and_our_agents():
    message = _error(_config(_person(1), {"agent_id": 2, "agent_type": "RobotAgent", "kwargs": {}}))
    assert message == (
        f"init_config.json:agents.1.agent_type: unknown agent type 'RobotAgent'; known: {', '.join(agent_type_names())}"
    )


def test_kwargs_id_must_agree_with_agent_id():
    agent = _person(5, name="Eve")
    agent["kwargs"]["id"] = 6
    assert _error(_config(agent)) == "init_config.json:agents.0.kwargs.id: 6 does not match agent_id 5"


def test_agent_kwarg_without_an_equivalent_is_refused_with_its_path():
    agents = [_person(i) for i in range(3)] + [_person(3, name="Dan", memory_backend="faiss")]
    message = _error(_config(*agents))
    assert message.startswith("init_config.json:agents.3.kwargs.memory_backend: not supported: memory lives in the agent")
    assert message.count("\n") == 0


def test_nested_config_key_our_agent_does_not_read_is_refused():
    message = _error(_config(_person(1, config={"reflection_interval": 3})))
    assert message == (
        "init_config.json:agents.0.kwargs.config.reflection_interval: not supported: PersonAgent reads the config keys "
        "max_parse_attempts, max_react_turns, memory, skill_timeout_s, tools"
    )


def test_config_values_are_validated_at_their_reference_path():
    message = _error(_config(_person(1, max_react_turns=0, memory={"window": 3})))
    assert message.splitlines() == [
        "init_config.json:agents.0.kwargs.max_react_turns: Input should be greater than or equal to 1",
        "init_config.json:agents.0.kwargs.memory.window: Extra inputs are not permitted",
    ]


def test_config_key_given_flat_and_nested_is_refused():
    message = _error(_config(_person(1, max_react_turns=2, config={"max_react_turns": 3})))
    assert message == "init_config.json:agents.0.kwargs.max_react_turns: given twice: here and in kwargs.config.max_react_turns"


def test_flat_field_conflicting_with_the_nested_profile_is_refused():
    message = _error(_config(_person(1, name="Ann", profile={"name": "Anna"})))
    assert message == "init_config.json:agents.0.kwargs.name: 'Ann' conflicts with kwargs.profile.name = 'Anna'"


def test_module_kwarg_our_module_does_not_take_is_refused():
    message = _error(_config(modules=[{"module_type": "SimpleSocialSpace", "kwargs": {"max_posts": 3}}]))
    assert message == (
        "init_config.json:env_modules.0.kwargs.max_posts: not supported by MessagingSpace (module_type SimpleSocialSpace); "
        "it takes: groups, inbox_limit, max_length"
    )


def test_contrib_agents_take_their_own_config_key():
    rule = {"agent_id": 1, "agent_type": "RuleBasedAgent", "kwargs": {"name": "bot", "rule": {"rule": "grim_trigger"}}}
    spec = reference_to_spec(_config(rule), RUN_ONLY)
    assert spec.agents[0].config == {"rule": {"rule": "grim_trigger"}} and spec.agents[0].profile == {"name": "bot"}
    rule["kwargs"]["rule"] = {"rule": "random"}
    assert _error(_config(rule)).startswith("init_config.json:agents.0.kwargs.rule.rule: Input should be 'tit_for_tat'")


def test_unknown_top_level_and_entry_keys_are_refused():
    config = _config()
    config["router"] = "codegen"
    config["agents"][0]["agent_name"] = "Ann"
    assert _error(config).splitlines() == [
        "init_config.json:router: unknown key; expected env_modules, agents",
        "init_config.json:agents.0.agent_name: unknown key; expected agent_id, agent_type, kwargs",
    ]


def test_duplicate_agent_ids_point_at_the_second_entry():
    assert _error(_config(_person(1), _person(1))) == "init_config.json:agents.1.agent_id: agent id 1 appears twice (also agents.0)"


def test_step_problems_point_into_steps_yaml():
    steps = {
        "start_t": "soon",
        "steps": [
            {"type": "run", "num_steps": 0},
            {"type": "questionnaire", "questionnaire_id": "q", "questions": [{"id": "a", "prompt": "p", "response_type": "scale"}]},
            {"type": "vote"},
            {"type": "ask", "question": "why?", "readonly": True},
        ],
    }
    assert _error(_config(), steps).splitlines() == [
        "steps.yaml:start_t: Input should be a valid datetime or date, input is too short",
        "steps.yaml:steps.0.num_steps: Input should be greater than or equal to 1",
        "steps.yaml:steps.1.questions.0.response_type: Input should be 'text', 'integer', 'float', 'choice' or 'json'",
        "steps.yaml:steps.2: Input tag 'vote' found using 'type' does not match any of the expected tags: "
        "'run', 'ask', 'intervene', 'questionnaire'",
        "steps.yaml:steps.3.readonly: Extra inputs are not permitted",
    ]


def test_bad_yaml_names_the_steps_file(tmp_path):
    steps = tmp_path / "steps.yaml"
    steps.write_text("steps:\n  - type: run\n    num_steps: [1\n", encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_reference(CONFIG, steps)
    assert caught.value.path == "steps.yaml"
    assert str(caught.value).startswith("steps.yaml: not valid YAML: while parsing a flow sequence")


def test_bad_json_names_the_config_file(tmp_path):
    config = tmp_path / "init_config.json"
    config.write_text('{"agents": [}', encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_reference(config, STEPS)
    assert str(caught.value) == "init_config.json: not valid JSON: Expecting value: line 1 column 13 (char 12)"


def test_error_paths_use_the_given_file_names(tmp_path):
    config = json.loads(CONFIG.read_text())
    config = copy.deepcopy(config)
    config["agents"][2]["kwargs"]["memory_backend"] = "faiss"
    (tmp_path / "world.json").write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(SpecError) as caught:
        load_reference(tmp_path / "world.json", STEPS)
    assert caught.value.path == "world.json:agents.2.kwargs.memory_backend"
