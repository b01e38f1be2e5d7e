"""Persona tables over REST: a population's ``from`` reads only under POLIS_INPUT_DIRS, and quotas count its rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import SpecError
from service.admission.intake import Intake
from service.admission.quotas import OwnerQuota, Quotas
from service.errors import QuotaExceededError

pytestmark = pytest.mark.usefixtures("reads_data_files")  # tables are parsed in a child process

TABLE = "name,age\n" + "".join(f"P{i},{20 + i}\n" for i in range(12))


def body(name: str, **population: object) -> bytes:
    import json

    return json.dumps({"name": "t", "population": [{"from": name, **population}], "steps": [{"type": "run", "num_steps": 2}]}).encode()


@pytest.fixture
def allowed(tmp_path: Path) -> Path:
    folder = tmp_path / "inputs"
    (folder / "sub").mkdir(parents=True)
    (folder / "sub" / "people.csv").write_text(TABLE)
    return folder


def test_a_table_under_an_input_dir_is_read_into_the_spec(allowed: Path):
    intake = Intake(input_dirs=(allowed,))
    for name in ("sub/people.csv", str(allowed / "sub" / "people.csv")):
        spec = intake.admit(body(name, count=5), "json", "lab")
        assert [a.profile for a in spec.all_agents()] == [{"name": f"P{i}", "age": 20 + i} for i in range(5)]
        assert spec.population[0].rows is not None and len(spec.population[0].rows) == 12


def test_any_other_path_is_refused_on_the_field_alike_whether_or_not_it_exists(allowed: Path, tmp_path: Path):
    outside = tmp_path / "private.csv"
    outside.write_text(TABLE)

    def refusal(intake: Intake, name: str) -> str:
        with pytest.raises(SpecError) as caught:
            intake.admit(body(name), "json", "lab")
        assert caught.value.path == "population.0.from"
        return str(caught.value)

    intake = Intake(input_dirs=(allowed,))
    messages = {refusal(intake, name) for name in (str(outside), "../private.csv", str(tmp_path / "absent.csv"), "/etc/passwd")}
    assert messages == {"population.0.from must be a file under the service's input folders (POLIS_INPUT_DIRS), named "
                        "relative to one of them"}  # and never the server's path to them
    assert str(allowed) not in messages.pop()
    assert refusal(Intake(), "sub/people.csv") == (
        "population.0.from must be a file under the service's input folders (POLIS_INPUT_DIRS), named relative to one of "
        "them, and there are none: the service reads no file until POLIS_INPUT_DIRS names a folder")
    # under an allowed folder, a missing file is said to be missing: that tells nothing about the server's other files
    assert refusal(intake, "absent.csv") == ("population.0.from: there is no file 'absent.csv' under the service's input "
                                             "folders (POLIS_INPUT_DIRS), named relative to one of them")


def test_a_bad_table_under_an_input_dir_names_its_row(allowed: Path):
    (allowed / "bad.jsonl").write_text('{"name": "A"}\n{"name": {"first": "B"}}\n')
    with pytest.raises(SpecError) as caught:
        Intake(input_dirs=(allowed,)).admit(body("bad.jsonl"), "json", "lab")
    assert caught.value.path == "population.0.from" and "row 2, column 'name'" in str(caught.value)


def test_inline_rows_need_no_input_dir_and_quotas_count_the_rows(allowed: Path):
    rows = [{"name": f"P{i}"} for i in range(3)]
    assert len(Intake().admit(body("people.csv", rows=rows), "json", "lab").all_agents()) == 3
    small = Intake(quotas=Quotas(OwnerQuota(max_agents=10, max_agent_steps=10**6, max_concurrent=1, max_disk_bytes=10**9)),
                   input_dirs=(allowed,))
    with pytest.raises(QuotaExceededError) as caught:
        small.admit(body("sub/people.csv"), "json", "lab")  # 12 rows, no count
    assert caught.value.path == "population.0.count" and "12" in str(caught.value)
    assert len(small.admit(body("sub/people.csv", count=10), "json", "lab").all_agents()) == 10
