"""The experiment spec: validation with field paths, JSON/YAML loading, populations, schema."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from engine.errors import SpecError
from engine.format_template import MAX_FORMAT_WIDTH
from engine.population.spec import PopulationSpec
from engine.spec import ExperimentSpec, load_spec, parse_spec
from engine.spec_schema import spec_json_schema

BASE = {"name": "t", "agents": [{"id": 1, "profile": {"name": "A"}}], "steps": [{"type": "run", "num_steps": 2}]}


def with_(**changes):
    return {**BASE, **changes}


@pytest.fixture
def members_made(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The sizes of the populations whose members are made during the test. Making them is refused (a
    ``RuntimeError``, which validation does not turn into a ``SpecError``), so a spec that slips past the
    size checks fails the test at once instead of expanding into gigabytes."""
    made: list[int] = []

    def profiles(self: PopulationSpec, *args: Any, **kwargs: Any) -> Any:
        made.append(self.size)
        raise RuntimeError(f"a population of {self.size} members was expanded")

    monkeypatch.setattr(PopulationSpec, "profiles", profiles)
    return made


@pytest.mark.parametrize(
    ("data", "path"),
    [
        (with_(batch_size=0), "batch_size"),
        (with_(agents=[{"id": 1, "type": "NoSuchAgent"}]), "agents.0.type"),
        (with_(agents=[{"profile": {}}]), "agents.0.id"),
        (with_(steps=[{"type": "run", "num_steps": 0}]), "steps.0.run.num_steps"),
        (with_(steps=[{"type": "teleport"}]), "steps.0"),
        (with_(environment={"modules": [{"type": "NoSuchModule"}]}), "environment.modules.0.type"),
        (with_(llm={"default": {"model": "x", "options": {"api_key": "sk-123"}}}), "llm.default.options"),
        (with_(llm={"default": {"model": "x", "api_key_env": "not a name"}}), "llm.default.api_key_env"),
    ],
)
def test_invalid_spec_errors_name_the_field_path(data, path):
    with pytest.raises(SpecError) as caught:
        parse_spec(data)
    assert caught.value.path.startswith(path)
    assert path in str(caught.value)


def test_spec_without_agents_is_refused():
    with pytest.raises(SpecError, match="no agents"):
        parse_spec(with_(agents=[]))


def test_duplicate_agent_ids_are_refused():
    with pytest.raises(SpecError, match="appears twice"):
        parse_spec(with_(agents=[{"id": 1}, {"id": 1}]))


def test_spec_is_frozen():
    spec = parse_spec(BASE)
    with pytest.raises(ValidationError, match="frozen"):
        spec.seed = 3  # type: ignore[misc]


def test_population_draws_profiles_with_the_seed_and_numbers_ids_after_explicit_agents():
    data = with_(population=[{"count": 5, "profile_template": {"name": "P{i}-{id}", "age": [20, 30, 40]}}])
    first = parse_spec({**data, "seed": 1}).all_agents()
    again = parse_spec({**data, "seed": 1}).all_agents()
    other = parse_spec({**data, "seed": 2}).all_agents()

    assert [a.id for a in first] == [1, 2, 3, 4, 5, 6]
    assert first[1].profile["name"] == "P0-2"
    assert [a.profile for a in first] == [a.profile for a in again]
    assert {a.profile["age"] for a in first[1:]} <= {20, 30, 40}
    assert [a.profile["age"] for a in first[1:]] != [a.profile["age"] for a in other[1:]]


def test_unknown_template_placeholder_is_refused():
    with pytest.raises(SpecError, match="placeholder"):
        parse_spec(with_(population=[{"count": 2, "profile_template": {"name": "{nope}"}}]))


@pytest.mark.parametrize(
    "template",
    ["{i:>300000000}", "{id:.300000000f}", "{i:0300000000}", ["ok", "{i:x>5000}"], "{i:>{id}}", "{i:c}", "{i.real}"],
)
def test_format_width_bomb_in_profile_template_is_refused_before_any_member_is_made(template, members_made):
    with pytest.raises(SpecError) as caught:
        parse_spec(with_(population=[{"count": 1_000_000, "profile_template": {"bio": template}}]))
    assert members_made == []  # (so it is refused at once, whatever the count: the speed goal follows from this)
    assert caught.value.path == "population.0.profile_template"
    assert "profile_template.bio" in str(caught.value)


def test_format_specs_up_to_the_width_limit_are_filled():
    spec = parse_spec(with_(population=[{"count": 2, "profile_template": {"bio": "{i:*>1000}|{id:08.3f}"}}]))
    bio = spec.all_agents()[2].profile["bio"]
    assert bio == "*" * 999 + "1|0003.000"
    assert MAX_FORMAT_WIDTH == 1000


def test_population_that_would_expand_past_the_size_cap_is_refused_without_expanding(members_made):
    # Widths within the limit, but 300 of them in a field, for a million members: ~300 GB if made.
    with pytest.raises(SpecError, match="population.0: the populations would expand"):
        parse_spec(with_(population=[{"count": 1_000_000, "profile_template": {"bio": "{i:>1000}" * 300}}]))
    with pytest.raises(SpecError, match="at most"):
        parse_spec(with_(population=[{"count": 500_000, "config": {"tools": ["x" * 1000]}}]))
    assert members_made == []  # refused on the bound, before any member was made (so at once, whatever the count)


def test_rule_based_agent_refuses_a_format_bomb_in_its_instruction_and_arguments():
    from engine.agent.contrib.rule_based import RuleConfig

    assert RuleConfig(instruction="play {move:>10} in round {round}").instruction.startswith("play")
    with pytest.raises(ValidationError, match="at most 1000"):
        RuleConfig(instruction="play {move:>300000000}")
    with pytest.raises(ValidationError, match="arguments.text"):
        RuleConfig(tool="send", arguments={"text": "{label:.99999999}"})


def test_load_spec_reads_json_and_yaml_alike(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps(BASE))
    (tmp_path / "s.yaml").write_text(
        "name: t\nagents:\n  - {id: 1, profile: {name: A}}\nsteps:\n  - {type: run, num_steps: 2}\n"
    )
    assert load_spec(tmp_path / "s.json") == load_spec(tmp_path / "s.yaml")


def test_load_spec_reports_syntax_errors_and_missing_files(tmp_path):
    (tmp_path / "bad.yaml").write_text("name: [unclosed\n")
    with pytest.raises(SpecError, match="not valid YAML"):
        load_spec(tmp_path / "bad.yaml")
    with pytest.raises(SpecError, match="cannot read"):
        load_spec(tmp_path / "missing.json")


def test_json_schema_describes_the_spec():
    schema = spec_json_schema()
    assert schema["title"] == "ExperimentSpec"
    assert {"name", "seed", "llm", "agents", "population", "environment", "steps", "batch_size"} <= set(schema["properties"])
    assert ExperimentSpec.model_fields["batch_size"].default == 256


def _environment(**environment: Any) -> dict[str, Any]:
    return {"name": "x", "agents": [{"id": 0}], "steps": [{"type": "run", "num_steps": 1}], "environment": environment}


def test_codegen_settings_beside_the_router_move_into_its_router_config() -> None:
    assert parse_spec(_environment(cache_similarity=0.5, final_summary=True)).environment.router_config == {
        "cache_similarity": 0.5, "final_summary": True}
    # a stored spec of another router holds them at their old defaults: they go
    assert parse_spec(_environment(router="react", cache_similarity=0.85, final_summary=False)).environment.router_config == {}
    with pytest.raises(SpecError, match="environment.cache_similarity: cache_similarity is a setting of the codegen router, not of react"):
        parse_spec(_environment(router="react", cache_similarity=0.5))


def test_an_unknown_field_anywhere_names_the_field_it_means() -> None:
    with pytest.raises(SpecError, match=r"^batch_sise: unknown field; did you mean 'batch_size'\?$"):
        parse_spec({**_environment(), "batch_sise": 8})
    with pytest.raises(SpecError, match=r"(?m)^steps.0.run.num_step: unknown field; did you mean .num_steps.\?$"):
        parse_spec({**_environment(), "steps": [{"type": "run", "num_step": 1}]})


def test_the_json_schema_checks_every_plugin_config_as_the_parser_does() -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(spec_json_schema())
    good = {**_environment(router="search_tool", router_config={"top_k": 2}, embedder="openai/text-embedding-3-small",
                           embedder_config={"dimensions": 64}, modules=[{"type": "MessagingSpace", "kwargs": {"groups": {}}}]),
            "agents": [{"id": 0, "config": {"max_react_turns": 2}}, {"id": 1, "type": "PublicGoodsAgent", "config": {"game": {}}}]}
    parse_spec(good)
    assert list(validator.iter_errors(good)) == []
    bad = {**_environment(router_config={"top_k": 2}, embedder_config={"dimensions": 64},
                          modules=[{"type": "MessagingSpace", "kwargs": {"grups": {}}}]),
           "agents": [{"id": 0, "config": {"max_react_turn": 2}}]}
    flagged = {tuple(error.absolute_path) for error in validator.iter_errors(bad)}
    assert flagged == {("agents", 0, "config"), ("environment", "modules", 0, "kwargs"), ("environment", "router_config"),
                       ("environment", "embedder_config")}
    for path in flagged:  # the parser refuses each of them too
        with pytest.raises(SpecError, match=r"takes no key '(max_react_turn|grups|top_k|dimensions)'"):
            parse_spec(_only(bad, path))


def _only(bad: dict[str, Any], path: tuple[Any, ...]) -> dict[str, Any]:
    """``bad`` with only the problem at ``path``: the other plugin configs made empty."""
    spec = {**_environment(modules=[{"type": "MessagingSpace"}]), "agents": [{"id": 0}]}
    if path[0] == "agents":
        spec["agents"] = bad["agents"]
    elif path[-1] == "kwargs":
        spec["environment"]["modules"] = bad["environment"]["modules"]
    else:
        spec["environment"][path[-1]] = bad["environment"][path[-1]]
    return spec
