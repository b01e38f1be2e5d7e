"""The experiment spec: validation with field paths, JSON/YAML loading, populations, schema."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from engine.errors import SpecError
from engine.spec import ExperimentSpec, load_spec, parse_spec, spec_json_schema

BASE = {"name": "t", "agents": [{"id": 1, "profile": {"name": "A"}}], "steps": [{"type": "run", "num_steps": 2}]}


def with_(**changes):
    return {**BASE, **changes}


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
