"""Survey files as populations: CSV with a YAML codebook, and Stata / SPSS files whose own labels fill the codebook;
a run then writes who each agent is (agent_profiles) and what its respondent really said (survey_answers)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys

import pandas as pd
import pyreadstat
import pytest
import yaml

from engine.errors import PopulationFileError, SpecError
from engine.society.run.runner import run_experiment
from engine.spec import load_spec
from engine.storage.reader import ReplayReader

CODEBOOK = {
    "columns": {
        "rid": {"role": "id"},
        "relig": {"role": "persona", "name": "religious", "labels": {1: "not", 2: "mildly", 3: "strongly"}},
        "rate": {"role": "target", "question": "How do you rate your marriage?", "scale": "ordinal",
                 "labels": {1: "poor", 2: "fair", 3: "good"}},
    },
    "missing": [9],
}
FRAME = pd.DataFrame({"rid": [11, 12, 13, 14], "relig": [1, 3, 2, 9], "rate": [3, 1, 9, 2], "other": ["x", "y", "z", "w"]})


def write_spec(folder, survey: str, codebook, **changes) -> str:
    spec = {"name": "survey", "seed": 1,
            "population": [{"from": survey, "codebook": codebook, "config": {"max_react_turns": 1}}],
            "steps": [{"type": "questionnaire", "questionnaire_id": "fair", "from_survey": True}], **changes}
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return str(path)


def test_a_csv_and_a_yaml_codebook_make_labelled_profiles_without_targets(tmp_path):
    FRAME.to_csv(tmp_path / "survey.csv", index=False)
    (tmp_path / "codebook.yaml").write_text(yaml.safe_dump(CODEBOOK))
    spec = load_spec(write_spec(tmp_path, "survey.csv", "codebook.yaml"))
    assert [a.profile for a in spec.all_agents()] == [{"religious": "not"}, {"religious": "strongly"},
                                                      {"religious": "mildly"}, {}]
    assert "other" not in spec.population[0].rows[0]  # a column the codebook does not list is never read
    assert spec.steps[0].questions[0].choices == ["poor", "fair", "good"]


@pytest.mark.parametrize("suffix", [".sav", ".dta"])
def test_a_labelled_file_gives_the_questions_and_labels_the_codebook_leaves_out(tmp_path, suffix):
    path = tmp_path / f"survey{suffix}"
    labels = {"relig": {1: "not", 2: "mildly", 3: "strongly", 9: "refused"}, "rate": {1: "poor", 2: "fair", 3: "good"}}
    questions = ["Respondent", "How religious are you?", "How do you rate your marriage?", "Other"]
    write = pyreadstat.write_sav if suffix == ".sav" else pyreadstat.write_dta
    write(FRAME, str(path), column_labels=questions, variable_value_labels=labels)
    roles = {"columns": {"rid": {"role": "id"}, "relig": {"role": "persona", "missing": [9]},
                         "rate": {"role": "target", "scale": "ordinal", "missing": [9]}}}
    spec = load_spec(write_spec(tmp_path, path.name, roles))
    rate = spec.population[0].codebook.columns["rate"]
    assert rate.question == "How do you rate your marriage?"
    assert [label for _, label in rate.labels] == ["poor", "fair", "good"]
    assert [a.profile for a in spec.all_agents()] == [{"relig": "not"}, {"relig": "strongly"}, {"relig": "mildly"}, {}]
    assert spec.steps[0].questions[0].prompt == "How do you rate your marriage?"


@pytest.mark.parametrize(("frame", "codebook", "says", "path"), [
    (FRAME.assign(relig=[1, 3, 4, 9]), CODEBOOK, "row 3, column 'relig': the code 4 has no label", "population.0"),
    (FRAME.drop(columns=["relig"]), CODEBOOK, "has no column 'relig'", "population.0.from"),
    (FRAME, {"columns": {"rate": {"role": "target"}}}, "target column 'rate' needs labels", "population.0.codebook"),
])
def test_bad_survey_input_is_refused_naming_where(tmp_path, frame, codebook, says, path):
    frame.to_csv(tmp_path / "survey.csv", index=False)
    with pytest.raises((SpecError, PopulationFileError)) as caught:
        load_spec(write_spec(tmp_path, "survey.csv", codebook))
    assert says in str(caught.value) and caught.value.path.startswith(path), (caught.value.path, str(caught.value))


async def test_a_run_writes_agent_profiles_and_the_real_answers_beside_the_simulated_ones(tmp_path, shell):
    FRAME.to_csv(tmp_path / "survey.csv", index=False)
    spec = load_spec(write_spec(tmp_path, "survey.csv", CODEBOOK))
    summary = await run_experiment(spec, tmp_path / "run", shell)
    assert summary.status == "completed", summary.error
    with ReplayReader(tmp_path / "run") as reader:
        profiles = reader.query("SELECT agent_id, respondent_id, weight, profile FROM agent_profiles ORDER BY agent_id").to_pylist()
        real = reader.query("SELECT agent_id, item, label, position, code FROM survey_answers ORDER BY agent_id").to_pylist()
        joined = reader.query(
            "SELECT count(*) AS n FROM questionnaire_answers q JOIN survey_answers s ON q.agent_id = s.agent_id "
            "AND q.question_id = s.item WHERE q.parse_success").column("n")[0].as_py()
        prompts = " ".join(r["messages"] or "" for r in reader.query("SELECT messages FROM transcripts").to_pylist())
    assert [(p["respondent_id"], p["weight"], json.loads(p["profile"])) for p in profiles] == [
        ("11", 1.0, {"religious": "not"}), ("12", 1.0, {"religious": "strongly"}), ("13", 1.0, {"religious": "mildly"}),
        ("14", 1.0, {})]
    assert real == [{"agent_id": 0, "item": "rate", "label": "good", "position": 2, "code": "3"},
                    {"agent_id": 1, "item": "rate", "label": "poor", "position": 0, "code": "1"},
                    {"agent_id": 2, "item": "rate", "label": None, "position": None, "code": None},
                    {"agent_id": 3, "item": "rate", "label": "fair", "position": 1, "code": "2"}]
    assert joined == 4
    assert "strongly" in prompts and "rid" not in prompts  # the persona reaches the prompt as a label; the id never



def labelled_file(folder, suffix: str):
    path = folder / f"survey{suffix}"
    labels = {"relig": {1: "not", 2: "mildly", 3: "strongly", 9: "refused"}, "rate": {1: "poor", 2: "fair", 3: "good"}}
    write = pyreadstat.write_sav if suffix == ".sav" else pyreadstat.write_dta
    write(FRAME, str(path), column_labels=["Respondent", "How religious are you?", "Rate it", "Other"],
          variable_value_labels=labels)
    return path


def test_a_sav_that_segfaults_pyreadstat_is_refused_naming_the_file_and_the_caller_reads_on(tmp_path):
    good = labelled_file(tmp_path, ".sav")
    crafted = bytearray(good.read_bytes())
    crafted[0xB4] = 0xFF  # the file's variable count: pyreadstat reads past its records
    (tmp_path / "crafted.sav").write_bytes(bytes(crafted))
    probe = subprocess.run([sys.executable, "-c", "import sys, pyreadstat; pyreadstat.read_sav(sys.argv[1])",
                            str(tmp_path / "crafted.sav")], capture_output=True, timeout=120)
    assert probe.returncode == -signal.SIGSEGV  # read in this process, it would end it
    roles = {"columns": {"rid": {"role": "id"}, "relig": {"role": "persona", "missing": [9]},
                         "rate": {"role": "target", "scale": "ordinal", "missing": [9]}}}
    with pytest.raises(PopulationFileError) as caught:
        load_spec(write_spec(tmp_path, "crafted.sav", roles))
    assert caught.value.path == "population.0.from"
    assert "'crafted.sav' cannot be read: its parser crashed on it (SIGSEGV)" in str(caught.value)
    assert str(tmp_path) not in str(caught.value)
    assert len(load_spec(write_spec(tmp_path, good.name, roles)).all_agents()) == 4


def test_a_dta_whose_label_is_not_utf8_is_refused_naming_the_file(tmp_path):
    path = labelled_file(tmp_path, ".dta")
    data = path.read_bytes()
    path.write_bytes(data.replace(b"How religious are you?", b"How religious are y\xff\xfe?"))
    roles = {"columns": {"rid": {"role": "id"}, "relig": {"role": "persona", "missing": [9]}}}
    with pytest.raises(PopulationFileError) as caught:
        load_spec(write_spec(tmp_path, path.name, roles))
    assert caught.value.path == "population.0.from"
    assert "'survey.dta' cannot be read: 'utf-8' codec can't decode byte 0xff" in str(caught.value)
