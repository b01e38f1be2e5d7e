"""Every spec field that names a file, through every door that takes a spec: the same allow-list (POLIS_INPUT_DIRS)
and the same refusal, whether the name comes in the spec itself or as a sweep's grid value (a whole object or one
field). On 90329b4 a grid value read any file the service could, and told whether a path existed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from engine.errors import SpecError
from service.admission.intake import Intake

pytestmark = pytest.mark.usefixtures("reads_data_files")  # tables are parsed in a child process

AGENTS = [{"id": i} for i in range(4)]
STEPS = [{"type": "run", "num_steps": 1, "tick": 600}]
CITY = {"name": "tiny", "regions": [{"id": "r1", "name": "North", "x": 0, "y": 0}], "pois": []}
CODEBOOK = {"columns": {"rid": {"role": "id"}, "sex": {"role": "persona", "labels": {1: "man", 2: "woman"}}}}


@pytest.fixture
def folders(tmp_path: Path) -> dict[str, Path]:
    """An input folder with a good file of each kind, and a private folder beside it with the same files."""
    made = {}
    for name in ("inputs", "private"):
        folder = made[name] = tmp_path / name
        folder.mkdir()
        (folder / "edges.csv").write_text("source,target\n0,1\n2,3\n")
        (folder / "people.csv").write_text("name,age\nAnn,34\nBo,51\nCy,22\nDi,40\n")
        (folder / "city.json").write_text(json.dumps(CITY))
        (folder / "survey.csv").write_text("rid,sex\n1,1\n2,2\n3,1\n4,2\n")
        (folder / "codebook.json").write_text(json.dumps(CODEBOOK))
    return made


def spec_with(**fields: Any) -> bytes:
    return json.dumps({"name": "doors", "steps": STEPS, **({"agents": AGENTS} if "population" not in fields else {}),
                       **fields}).encode()


def _layer(name: str) -> dict[str, Any]:
    return {"layers": {"friend": {"from": name}}}


def _city(name: str) -> dict[str, Any]:
    return {"modules": [{"type": "MobilitySpace", "kwargs": {"city_file": name}}]}


#: Each field that names a file: the spec that names ``{name}`` in it directly, and the field path a refusal names.
DIRECT: dict[str, tuple[Any, str]] = {
    "population table": (lambda n: {"population": [{"from": n, "count": 2}]}, "population.0.from"),
    "survey codebook": (lambda n: {"population": [{"from": "survey.csv", "codebook": n, "count": 2}]}, "population.0.codebook"),
    "survey table": (lambda n: {"population": [{"from": n, "codebook": "codebook.json", "count": 2}]}, "population.0.from"),
    "edge file": (lambda n: {"network": _layer(n)}, "network.layers.friend.from"),
    "city file": (lambda n: {"environment": _city(n)}, "environment.modules.0.kwargs.city_file"),
}

#: Each grid door: a base spec (naming only allowed files), a grid key, and a grid value naming ``{name}``.
GRID: dict[str, tuple[dict[str, Any], str, Any]] = {
    "whole layer": ({"network": _layer("edges.csv")}, "network.layers.friend", lambda n: {"from": n}),
    "layer's from": ({"network": _layer("edges.csv")}, "network.layers.friend.from", lambda n: n),
    "whole network": ({"network": _layer("edges.csv")}, "network", lambda n: _layer(n)),
    "whole population": ({"population": [{"from": "people.csv", "count": 2}]}, "population.0", lambda n: {"from": n, "count": 2}),
    "population list": ({"population": [{"from": "people.csv", "count": 2}]}, "population", lambda n: [{"from": n, "count": 2}]),
    "survey's codebook": ({"population": [{"from": "survey.csv", "codebook": "codebook.json", "count": 2}]}, "population.0",
                          lambda n: {"from": "survey.csv", "codebook": n, "count": 2}),
    "city file": ({"environment": _city("city.json")}, "environment.modules.0.kwargs.city_file", lambda n: n),
}


def refusal(intake: Intake, body: bytes) -> SpecError:
    with pytest.raises(SpecError) as caught:
        intake.admit(body, "json", "lab")
    return caught.value


@pytest.mark.parametrize("field", DIRECT)
def test_a_file_named_in_the_spec_is_read_only_under_the_input_folders(folders: dict[str, Path], field: str) -> None:
    make, path = DIRECT[field]
    intake = Intake(input_dirs=(folders["inputs"],))
    good = {"population table": "people.csv", "survey codebook": "codebook.json", "survey table": "survey.csv",
            "edge file": "edges.csv", "city file": "city.json"}[field]
    intake.admit(spec_with(**make(good)), "json", "lab")
    messages = set()
    for name in (str(folders["private"] / good), f"../private/{good}", str(folders["private"] / "absent.csv"), "/etc/passwd"):
        error = refusal(intake, spec_with(**make(name)))
        assert error.path == path, (name, str(error))
        messages.add(str(error).replace(name, "<name>"))
    assert len(messages) == 1, messages  # one message whether the file exists or not


@pytest.mark.parametrize("door", GRID)
def test_a_grid_value_naming_a_file_is_held_to_the_input_folders_as_the_spec_is(folders: dict[str, Path], door: str) -> None:
    base, key, value = GRID[door]
    intake = Intake(input_dirs=(folders["inputs"],))
    good = {"network": "edges.csv", "population": "people.csv", "environment": "city.json"}[next(iter(base))]
    if door == "survey's codebook":
        good = "codebook.json"
    accepted = intake.admit(spec_with(**base, sweep={"grid": {key: [value(good)]}}), "json", "lab")
    assert accepted.sweep is not None
    messages = set()
    for name in (str(folders["private"] / good), f"../private/{good}", str(folders["private"] / "absent.csv")):
        error = refusal(intake, spec_with(**base, sweep={"grid": {key: [value(good), value(name)]}}))
        assert error.path.startswith(f"sweep.grid.{key}.1") or error.path.startswith("environment.modules.0.kwargs"), \
            (name, error.path, str(error))
        assert "must be a file under" in str(error)
        messages.add(str(error).replace(name, "<name>"))
    assert len(messages) == 1, messages


def test_a_grid_value_is_stored_located_so_each_cell_opens_what_was_checked(folders: dict[str, Path]) -> None:
    (folders["inputs"] / "other.csv").write_text("name,age\nEd,60\nFi,70\n")
    (folders["inputs"] / "pair.csv").write_text("source,target\n0,1\n")
    intake = Intake(input_dirs=(folders["inputs"],))
    spec = intake.admit(spec_with(network=_layer("pair.csv"), population=[{"from": "people.csv", "count": 2}], sweep={
        "grid": {"network.layers.friend.from": ["pair.csv"], "population.0": [{"from": "other.csv", "count": 2}]}}),
        "json", "lab")
    assert spec.sweep is not None
    assert spec.sweep.grid["network.layers.friend.from"] == [str((folders["inputs"] / "pair.csv").resolve())]
    assert spec.sweep.grid["population.0"][0]["rows"] == [{"name": "Ed", "age": 60}, {"name": "Fi", "age": 70}]


def test_sweeping_one_field_of_a_populations_table_is_refused_since_its_rows_would_stay_the_bases(folders: dict[str, Path]) -> None:
    intake = Intake(input_dirs=(folders["inputs"],))
    for key, value in (("population.0.from", "people.csv"), ("population.0.columns", ["name"]),
                       ("population.0.rows", [{"name": "X"}])):
        error = refusal(intake, spec_with(population=[{"from": "people.csv", "count": 2}], sweep={"grid": {key: [value]}}))
        assert error.path == f"sweep.grid.{key}" and "sweep the whole population (population.0)" in str(error)
