"""Files a spec names resolve only under the run's inputs, the allow-list and bundled data; nothing else leaks."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from engine.env.actor import EnvRouterConfig, build_router
from engine.env.input_files import InputRoots, input_roots, resolve_input_file
from engine.env.modules.mobility import MobilitySpace
from engine.errors import SpecError
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec

TRIANGLE = {
    "name": "Triangle",
    "regions": [{"id": "A", "name": "Alpha", "x": 0, "y": 0}, {"id": "B", "name": "Beta", "x": 3, "y": 0},
                {"id": "C", "name": "Gamma", "x": 0, "y": 4}],
    "roads": [["A", "B"], ["B", "C"], ["A", "C"]],
}
SECRET = "root:x:0:0:secret-line-of-a-server-file"


@pytest.fixture
def server(tmp_path: Path) -> dict[str, Path]:
    """A run directory with inputs/, an allow-listed directory, and files outside both."""
    run, allowed, outside = tmp_path / "run", tmp_path / "shared-inputs", tmp_path / "outside"
    for d in (run / "inputs", allowed, outside):
        d.mkdir(parents=True)
    (run / "inputs" / "mine.json").write_text(json.dumps({**TRIANGLE, "name": "Mine"}))
    (allowed / "shared.json").write_text(json.dumps({**TRIANGLE, "name": "Shared"}))
    (outside / "secret.txt").write_text(SECRET)
    (outside / "city.json").write_text(json.dumps(TRIANGLE))
    (run / "inputs" / "link.json").symlink_to(outside / "city.json")
    (run / "inputs" / "folder").mkdir()
    os.mkfifo(run / "inputs" / "pipe.json")
    return {"run": run, "allowed": allowed, "outside": outside}


def _city_name(server: dict[str, Path], city_file: str) -> str:
    config = EnvRouterConfig(modules=(("MobilitySpace", {"city_file": city_file}),), router="react", run_dir=server["run"],
                             input_dirs=(server["allowed"],))
    return build_router(config).env_modules[0].city.name


def test_files_under_the_runs_inputs_the_allow_list_and_bundled_data_load(server: dict[str, Path]) -> None:
    assert _city_name(server, "mine.json") == "Mine"
    assert _city_name(server, str(server["run"] / "inputs" / "mine.json")) == "Mine"
    assert _city_name(server, "shared.json") == "Shared"
    assert _city_name(server, str(server["allowed"] / "shared.json")) == "Shared"
    assert _city_name(server, "small_city.json") == "Small City"


@pytest.mark.parametrize("city_file", [
    "{outside}/secret.txt",  # exists, not JSON
    "{outside}/city.json",  # exists, a valid city
    "{outside}/missing.json",  # does not exist
    "/etc/passwd",
    "/dev/zero",
    "../../outside/city.json",  # a walk out of inputs/
    "link.json",  # a symlink inside inputs/ to a file outside
    "folder",
    "pipe.json",  # a FIFO: opening it would block the actor
    "data/small_city.json",  # bundled data by bare name only
    "",
])
def test_anything_else_is_refused_with_one_message_that_reveals_nothing(server: dict[str, Path], city_file: str) -> None:
    named = city_file.replace("{outside}", str(server["outside"]))
    with pytest.raises(SpecError) as caught:
        _city_name(server, named)
    message = str(caught.value)
    assert message == ("city_file must be a file under the run's inputs/ folder or the input folders (POLIS_INPUT_DIRS), "
                       "named relative to one of them, the bundled data (small_city.json)")
    assert str(server["run"]) not in message and str(server["allowed"]) not in message  # a run's error reaches callers
    assert SECRET not in message and "JSON" not in message and "exist" not in message


def test_a_module_built_outside_a_run_reads_bundled_data_only(tmp_path: Path) -> None:
    (tmp_path / "city.json").write_text(json.dumps(TRIANGLE))
    with pytest.raises(SpecError, match=r"^city_file must be a file under the bundled data \(small_city.json\)$"):
        MobilitySpace(city_file=str(tmp_path / "city.json"))
    with input_roots(InputRoots((tmp_path,))):
        assert MobilitySpace(city_file="city.json").city.name == "Triangle"
    assert MobilitySpace(city_file="small_city.json").city.name == "Small City"


def test_an_oversized_input_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.env import input_files

    (tmp_path / "big.json").write_text(" " * 100)
    monkeypatch.setattr(input_files, "MAX_INPUT_BYTES", 10)
    with pytest.raises(SpecError, match="over the 10 byte limit"):
        resolve_input_file("city_file", "big.json", roots=InputRoots((tmp_path,)))


async def test_a_run_naming_a_server_file_fails_before_tick_0_without_reading_it(shell, tmp_path: Path) -> None:
    (tmp_path / "secret.json").write_text(json.dumps({"secret": SECRET}))
    spec = parse_spec({
        "name": "leak",
        "agents": [{"id": 0, "config": {"max_react_turns": 1, "tools": ["finish"]}}],
        "environment": {"router": "react", "modules": [{"type": "MobilitySpace", "kwargs": {"city_file": str(tmp_path / "secret.json")}}]},
        "steps": [{"type": "run", "num_steps": 1, "tick": 600}],
    })
    summary = await run_experiment(spec, tmp_path / "run", shell)

    assert summary.status == "failed" and summary.ticks_done == 0 and summary.agent_steps == 0
    assert "city_file must be a file under" in (summary.error or "")
    assert SECRET not in (summary.error or "") and "secret" not in (summary.error or "").split("under", 1)[1]
