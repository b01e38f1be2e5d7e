"""The reference system's init_config.json + steps.yaml, imported as a spec (and its problems refused with their paths)."""

from __future__ import annotations

import copy
import json
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from engine.agent.registry import agent_type_names
from engine.env.registry import env_module_names
from engine.errors import SpecError
from engine.reference import load_reference, reference_to_spec
from engine.reference.modules import REFERENCE_MODULE_TYPES
from engine.spec import AskStep, InterveneStep, QuestionnaireStep, RunStep

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
    # Flat kwargs are profile fields, except the reference's config keys.
    assert alice.profile == {"name": "Alice", "age": 28, "occupation": "software engineer",
                             "bio": "Runs the neighbourhood book club."}
    assert alice.config == {"max_react_turns": 3}  # enable_memory / enable_todo_list: true is what our agent does
    assert bob.profile == {"name": "Bob", "age": 45, "occupation": "nurse", "personality": "calm and practical"}
    assert bob.config == {"max_react_turns": 3}
    assert chen.profile == {"name": "Chen", "age": 19, "occupation": "student", "interests": ["music", "local politics"]}
    assert chen.config == {"max_react_turns": 2, "memory": {"max_chars": 6000, "window_turns": 6}}
    assert "id" not in dana.profile and dana.config == {"max_react_turns": 3}
    [module] = example.environment.modules
    assert module.type == "SimpleSocialSpace"
    assert module.kwargs == {"agent_id_name_pairs": [[1, "Alice"], [2, "Bob"], [3, "Chen"], [4, "Dana"]]}
    assert (example.environment.router, example.environment.router_config["final_summary"]) == ("codegen", True)


def test_example_steps_map_onto_the_spec_step_models(example):
    assert example.start_time == datetime(2026, 3, 2, 8, 0, 0)
    run1, survey, ask, intervene, run2 = example.steps
    assert run1 == RunStep(num_steps=2, tick=3600) and run2 == RunStep(num_steps=1, tick=1800)
    assert isinstance(survey, QuestionnaireStep)
    assert (survey.questionnaire_id, survey.title, survey.target_agent_ids) == ("morning_check_in", "Morning check-in", None)
    assert [(q.id, q.response_type, q.choices) for q in survey.questions] == [
        ("mood", "choice", ["happy", "neutral", "unhappy"]), ("contacts", "integer", None), ("plan", "text", None)]
    assert ask == AskStep(question="Which residents talked to each other, and about what?")
    assert isinstance(intervene, InterveneStep) and intervene.instruction.startswith("Tell every resident")
    assert example.total_ticks() == 3


def test_overrides_set_the_name_and_llm():
    spec = load_reference(CONFIG, STEPS, name="book-club", llm={"default": {"model": "sim/default:other"}})
    assert spec.name == "book-club" and spec.llm.default.model == "sim/default:other"


def test_codegen_router_final_summary_defaults_to_on_and_can_be_switched_off():
    assert reference_to_spec({**_config(), "codegen_router": {}}, RUN_ONLY).environment.router_config["final_summary"] is True
    off = reference_to_spec({**_config(), "codegen_router": {"final_summary_enabled": False}}, RUN_ONLY)
    assert (off.environment.router, off.environment.router_config["final_summary"]) == ("codegen", False)
    absent = reference_to_spec(_config(), RUN_ONLY).environment  # the reference's router summarises by default
    assert (absent.router, absent.router_config["final_summary"]) == ("codegen", True)
    assert _error({**_config(), "codegen_router": {"final_summary_enabled": "yes", "model": "x"}}).splitlines() == [
        "init_config.json:codegen_router.model: unknown key; expected final_summary_enabled",
        "init_config.json:codegen_router.final_summary_enabled: true or false is required, got 'yes'",
    ]


def test_reference_config_keys_map_or_are_refused_with_the_reason():
    spec = reference_to_spec(_config(_person(1, name="Ann", recent_memory_limit=4, enable_todo_list=True,
                                             extra_skill_paths=[])), RUN_ONLY)
    assert (spec.agents[0].profile, spec.agents[0].config) == ({"name": "Ann"}, {"memory": {"window_turns": 4}})
    message = _error(_config(_person(1, enable_memory=False, disabled_skill_ids=["daily-planning"],
                                     memory_consolidation_interval=5, memory_context_max_chars=0)))
    assert message.splitlines() == [
        "init_config.json:agents.0.kwargs.enable_memory: not supported: our agents always keep thread memory "
        "(AGENT_MEMORY.md) and episodes; only enable_memory: True is accepted",
        "init_config.json:agents.0.kwargs.disabled_skill_ids: not supported: skills cannot be disabled per agent "
        "(narrow the skill tools with 'tools'); only disabled_skill_ids: [] is accepted",
        "init_config.json:agents.0.kwargs.memory_consolidation_interval: not supported: our agents always consolidate "
        "the thread into AGENT_MEMORY.md once it passes memory.max_chars; there is no consolidation schedule to set",
        "init_config.json:agents.0.kwargs.memory_context_max_chars: Input should be greater than or equal to 1",
    ]


def test_a_second_agent_class_is_refused():
    rule = {"agent_id": 2, "agent_type": "RuleBasedAgent", "kwargs": {"id": 2}}
    assert _error(_config(_person(1), rule)) == (
        "init_config.json:agents.1.agent_type: RuleBasedAgent differs from agents.0's PersonAgent; "
        "the reference runs one agent class per society"
    )


def test_a_module_type_given_twice_is_refused():
    modules = [{"module_type": "SimpleSocialSpace", "kwargs": {}}, {"module_type": "EventSpace", "kwargs": {}},
               {"module_type": "SimpleSocialSpace", "kwargs": {}}]
    assert _error(_config(modules=modules)) == (
        "init_config.json:env_modules.2.module_type: SimpleSocialSpace appears twice (also env_modules.0); "
        "the reference keeps one module per type"
    )


@pytest.mark.parametrize(("kind", "ours"), [
    ("SimpleSocialSpace", "SimpleSocialSpace"), ("SocialMediaSpace", "SocialMediaSpace"), ("EconomySpace", "PersonEconomySpace"),
    ("MobilitySpace", "MobilitySpace"), ("EventSpace", "EventSpace"), ("GlobalInformationEnv", "GlobalInformationEnv"),
    ("PrisonersDilemmaEnv", "PrisonersDilemmaGame"), ("PublicGoodsEnv", "PublicGoodsGame"), ("TrustGameEnv", "TrustGame"),
])
def test_reference_module_types_map_onto_ours_with_empty_kwargs(kind, ours):
    spec = reference_to_spec(_config(modules=[{"module_type": kind, "kwargs": {}}]), RUN_ONLY)
    assert [(m.type, m.kwargs) for m in spec.environment.modules] == [(ours, {})]


def test_reference_economy_and_global_information_kwargs_reach_the_modules_that_take_them():
    modules = [{"module_type": "EconomySpace", "kwargs": {"people": [{"id": 1, "currency": 20, "skill": 2}]}},
               {"module_type": "GlobalInformationEnv", "kwargs": {"global_information": "the river is high"}}]
    spec = reference_to_spec(_config(modules=modules), RUN_ONLY)
    assert [(m.type, m.kwargs) for m in spec.environment.modules] == [
        ("PersonEconomySpace", modules[0]["kwargs"]), ("GlobalInformationEnv", modules[1]["kwargs"])]
    wrong = [{"module_type": "EconomySpace", "kwargs": {"persons": []}}]
    assert _error(_config(modules=wrong)).startswith(
        "init_config.json:env_modules.0.kwargs.persons: not supported by PersonEconomySpace (module_type EconomySpace); "
        "it takes: accounts, default_balance, goods, hourly_wage, ")


def test_agent_id_name_pairs_declare_the_agents_and_name_the_unnamed():
    pairs = [[1, "Ann"], [2, "Bo"]]
    spec = reference_to_spec(_config(_person(1), _person(2, name="Bob"),
                                     modules=[{"module_type": "SimpleSocialSpace", "kwargs": {"agent_id_name_pairs": pairs}}]),
                             RUN_ONLY)
    assert [a.profile["name"] for a in spec.agents] == ["Ann", "Bob"]  # a profile name stays the profile's
    wrong = [{"module_type": "SimpleSocialSpace", "kwargs": {"agent_id_name_pairs": [[1, "Ann"], [7, "Zed"]]}}]
    assert _error(_config(_person(1), _person(2), modules=wrong)).splitlines() == [
        "init_config.json:env_modules.0.kwargs.agent_id_name_pairs.1: agent 7 is not in agents",
        "init_config.json:env_modules.0.kwargs.agent_id_name_pairs: agents [2] have no pair: "
        "the pairs declare the society's agents",
    ]


def test_init_config_may_be_yaml(tmp_path):
    config = tmp_path / "init_config.yaml"
    config.write_text(yaml.safe_dump(json.loads(CONFIG.read_text())), encoding="utf-8")
    assert load_reference(config, STEPS).agents == load_reference(CONFIG, STEPS).agents


def test_unknown_module_type_names_the_type_its_path_and_our_modules():
    message = _error(_config(modules=[{"module_type": "CitySpace", "kwargs": {}}]))
    assert message == (
        "init_config.json:env_modules.0.module_type: unknown environment module type 'CitySpace'; "
        f"known: {', '.join(sorted({*env_module_names(), *REFERENCE_MODULE_TYPES}))}"
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
        "env_template_mode, max_parse_attempts, max_react_turns, memory, skill_timeout_s, tools"
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
        "init_config.json:env_modules.0.kwargs.max_posts: not supported by SimpleSocialSpace; "
        "it takes: agent_id_name_pairs, groups, inbox_limit, max_length"
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
        "init_config.json:router: unknown key; expected env_modules, agents, codegen_router",
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
