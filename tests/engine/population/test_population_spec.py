"""Populations from persona tables in a spec: one agent per row, seeded samples, column subsets, stored with the spec."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from engine.errors import PopulationFileError, SpecError
from engine.spec import load_spec, parse_spec

pytestmark = pytest.mark.usefixtures("reads_data_files")  # tables are parsed in a child process

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
PEOPLE = [
    {"name": "Ann", "age": 34, "occupation": "nurse", "city": "Oslo"},
    {"name": "Bo", "age": 51, "occupation": "baker", "city": "Rome"},
    {"name": "Cy", "age": 22, "occupation": "student", "city": "Lima"},
    {"name": "Di", "age": 67, "occupation": "retired", "city": "Pune"},
    {"name": "Ed", "age": 45, "occupation": "driver", "city": "Kiev"},
    {"name": "Fa", "age": 29, "occupation": "coder", "city": "Cork"},
]


def write_table(path: Path, rows: list[dict[str, Any]]) -> Path:
    if path.suffix == ".parquet":
        pq.write_table(pa.Table.from_pylist(rows), path)
    elif path.suffix == ".csv":
        path.write_text(",".join(rows[0]) + "\n" + "".join(",".join(str(v) for v in r.values()) + "\n" for r in rows))
    else:
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def write_spec(folder: Path, population: dict[str, Any], **fields: Any) -> Path:
    spec = {"name": "personas", "seed": 3, "population": [population], "steps": [{"type": "run", "num_steps": 1}], **fields}
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


@pytest.mark.parametrize("suffix", [".parquet", ".csv", ".jsonl"])
def test_each_row_of_a_table_makes_one_agent_with_its_columns_as_profile_fields(tmp_path: Path, suffix: str):
    (tmp_path / "data").mkdir()
    write_table(tmp_path / "data" / f"people{suffix}", PEOPLE)
    spec = load_spec(write_spec(tmp_path, {"from": f"data/people{suffix}", "config": {"max_react_turns": 1}},
                                agents=[{"id": 0, "profile": {"name": "Host"}}]))
    agents = spec.all_agents()
    assert [a.id for a in agents] == list(range(7))
    assert [a.profile for a in agents[1:]] == PEOPLE
    assert all(a.type == "PersonAgent" and a.config == {"max_react_turns": 1} for a in agents[1:])


def test_first_takes_the_leading_rows_and_random_a_sample_seeded_by_the_spec(tmp_path: Path):
    write_table(tmp_path / "people.csv", PEOPLE)

    def names(seed: int, sample: str) -> list[str]:
        spec = load_spec(write_spec(tmp_path, {"from": "people.csv", "count": 3, "sample": sample}, seed=seed))
        return [a.profile["name"] for a in spec.all_agents()]

    assert names(1, "first") == names(2, "first") == ["Ann", "Bo", "Cy"]
    samples = {seed: names(seed, "random") for seed in range(6)}
    assert samples[4] == names(4, "random")  # reproducible
    assert len({tuple(s) for s in samples.values()}) > 1  # the seed changes which rows
    order = [p["name"] for p in PEOPLE]
    for sample in samples.values():  # three distinct rows, kept in the file's order
        assert len(set(sample)) == 3 and sample == sorted(sample, key=order.index)


def test_columns_pick_the_profile_fields_and_only_those_are_stored(tmp_path: Path):
    write_table(tmp_path / "people.parquet", PEOPLE)
    spec = load_spec(write_spec(tmp_path, {"from": "people.parquet", "columns": ["name", "city"]}))
    assert [a.profile for a in spec.all_agents()] == [{"name": p["name"], "city": p["city"]} for p in PEOPLE]
    assert spec.population[0].rows == [{"name": p["name"], "city": p["city"]} for p in PEOPLE]


def test_the_stored_spec_carries_its_rows_and_needs_no_file(tmp_path: Path):
    table = write_table(tmp_path / "people.jsonl", PEOPLE)
    spec = load_spec(write_spec(tmp_path, {"from": "people.jsonl", "count": 4, "sample": "random"}))
    table.unlink()
    stored = json.loads(json.dumps(spec.model_dump(mode="json")))
    assert stored["population"][0]["from"] == "people.jsonl" and len(stored["population"][0]["rows"]) == 6
    again = parse_spec(stored)
    assert again == spec and again.spec_hash() == spec.spec_hash()
    assert [a.profile for a in again.all_agents()] == [a.profile for a in spec.all_agents()]


def test_a_template_population_dumps_as_before_without_table_fields():
    spec = parse_spec({"name": "t", "population": [{"count": 2, "profile_template": {"name": "P{i}"}}],
                       "steps": [{"type": "run", "num_steps": 1}]})
    assert list(spec.model_dump(mode="json")["population"][0]) == ["count", "type", "profile_template", "config", "id_start"]


@pytest.mark.parametrize(("population", "path", "expected"), [
    ({"from": "people.csv", "count": 7}, "population.0.count", "7 is more than the 6 rows of the table"),
    ({"from": "people.csv", "profile_template": {"mood": ["ok"]}}, "population.0.profile_template", "not both"),
    ({"from": "people.csv", "sample": "all"}, "population.0.sample", "'first' or 'random'"),
    ({"count": 2, "columns": ["name"]}, "population.0.rows", "'columns' picks columns of a table"),
    ({"profile_template": {"name": "P{i}"}}, "population.0.count", "needs a count"),
])
def test_a_population_the_table_cannot_make_names_its_field(tmp_path: Path, population, path: str, expected: str):
    write_table(tmp_path / "people.csv", PEOPLE)
    with pytest.raises(SpecError) as caught:
        load_spec(write_spec(tmp_path, population))
    assert caught.value.path == path and expected in str(caught.value)


def test_a_bad_row_is_named_through_load_spec(tmp_path: Path):
    (tmp_path / "people.jsonl").write_text('{"name": "Ann"}\n{"name": "Bo", "age": NaN}\n')
    with pytest.raises(PopulationFileError) as caught:
        load_spec(write_spec(tmp_path, {"from": "people.jsonl"}))
    assert (caught.value.path, caught.value.row, caught.value.column) == ("population.0.from", 2, "age")
    with pytest.raises(PopulationFileError) as missing:
        load_spec(write_spec(tmp_path, {"from": "people.jsonl", "columns": ["name", "income"]}))
    assert (missing.value.row, missing.value.column) == (1, "income")


def test_a_table_named_in_data_that_was_not_read_is_refused_and_inline_rows_are_checked():
    base = {"name": "t", "steps": [{"type": "run", "num_steps": 1}]}
    with pytest.raises(SpecError) as unread:
        parse_spec({**base, "population": [{"from": "people.csv"}]})
    assert unread.value.path == "population.0.rows" and "'people.csv' has not been read" in str(unread.value)
    with pytest.raises(SpecError) as nested:
        parse_spec({**base, "population": [{"rows": [{"name": "Ann"}, {"name": "Bo", "tags": ["a"]}]}]})
    assert "row 2, column 'tags': a list cannot be a profile field" in str(nested.value)
    inline = parse_spec({**base, "population": [{"rows": [{"name": "Ann", "age": None}, {"name": "Bo"}]}]})
    assert [a.profile for a in inline.all_agents()] == [{"name": "Ann"}, {"name": "Bo"}]


def test_the_shipped_persona_table_makes_the_example_spec(tmp_path: Path):
    spec = load_spec(EXAMPLES / "personas.yaml")
    agents = spec.all_agents()
    assert len(spec.population[0].rows or []) == 24 and len(agents) == 16
    assert all(set(a.profile) == {"name", "age", "occupation", "city", "political_leaning", "interests"} for a in agents)
    assert len({a.profile["name"] for a in agents}) == 16


def test_a_sweep_of_a_tables_count_makes_cells_from_the_stored_rows(tmp_path: Path):
    from engine.sweep import expand_sweep

    table = write_table(tmp_path / "people.csv", PEOPLE)
    spec = load_spec(write_spec(tmp_path, {"from": "people.csv", "sample": "random"},
                                sweep={"grid": {"population.0.count": [2, 4]}}))
    table.unlink()  # the cells read no file
    cells = expand_sweep(spec)
    assert [len(c.spec.all_agents()) for c in cells] == [2, 4]
    names = {p["name"] for p in PEOPLE}
    assert all(a.profile["name"] in names for c in cells for a in c.spec.all_agents())
