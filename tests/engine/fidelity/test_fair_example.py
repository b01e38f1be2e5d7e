"""examples/fidelity as a user runs it: prepare Fair's survey from statsmodels, run the rehearsal, score it by the CLI
and from Python; the figures land on the value the rehearsal's noise implies."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import polis

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "fidelity"


def copy_example(tmp_path: Path) -> Path:
    folder = tmp_path / "fidelity"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("fair.csv", "__pycache__"))
    subprocess.run([sys.executable, str(folder / "prepare.py")], check=True, capture_output=True, timeout=120)
    return folder


def polis_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "POLIS_SCHEDULER": "in-process"}
    return subprocess.run([sys.executable, "-m", "polis", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


def test_the_example_runs_and_scores_from_the_cli(tmp_path):
    folder = copy_example(tmp_path)
    assert len((folder / "fair.csv").read_text().splitlines()) == 6367  # 6,366 respondents and the header
    ran = polis_cli("run", str(folder / "fair-rehearsal.yaml"), "--run-dir", "run", cwd=tmp_path)
    assert ran.returncode == 0 and "status: completed" in ran.stdout, ran.stdout + ran.stderr[-3000:]
    scored = polis_cli("fidelity", "run", "--by", "religious", cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr
    accuracy = re.search(r"^rate_marriage\s+accuracy\s+all\s+(\S+)\s+\[(\S+), (\S+)\]", scored.stdout, re.MULTILINE)
    assert accuracy is not None, scored.stdout
    value, low, high = (float(x) for x in accuracy.groups())
    assert low <= 0.8 <= high and low <= value <= high  # rehearse_noise 0.2: accuracy 0.8 in expectation
    assert "religious=strongly religious" in scored.stdout

    missing = polis_cli("fidelity", "run", "--by", "party", cwd=tmp_path)
    assert missing.returncode == 2 and "no respondent has the persona field 'party'" in missing.stderr


def test_the_example_runs_and_scores_from_python(tmp_path):
    folder = copy_example(tmp_path)
    with polis.Session(scheduler="in-process") as session:
        run = session.run(folder / "fair-rehearsal.yaml", tmp_path / "run", progress=False)
        assert run.status == "completed"
        figures = run.fidelity(by=["education"], bootstrap=100)
        whole = figures[(figures["group_by"].isna()) & (figures["metric"] == "accuracy")].iloc[0]
        assert whole["ci_low"] <= 0.8 <= whole["ci_high"] and whole["n"] == 300
        assert set(figures[figures["group_by"] == "education"]["group"]) <= {
            "grade school", "high school", "some college", "college graduate", "some graduate school", "advanced degree"}
        stored = run.sql("SELECT count(*) AS n FROM fidelity").column("n")[0].as_py()
        assert stored == len(figures)


def test_the_example_runs_and_scores_over_rest(tmp_path):
    from engine.cluster_options import IN_PROCESS
    from service.settings import ServiceSettings
    from tests.service.live import serve, wait_until_final

    folder = copy_example(tmp_path)
    settings = ServiceSettings(data_dir=tmp_path / "data", scheduler=IN_PROCESS, input_dirs=(folder,))
    with serve(settings) as http:
        posted = http.post("/experiments", content=(folder / "fair-rehearsal.yaml").read_bytes(),
                           headers={"Content-Type": "application/yaml"})
        assert posted.status_code == 201, posted.text  # fair.csv and its codebook found under POLIS_INPUT_DIRS
        assert wait_until_final(http, posted.json()["id"])["status"] == "completed"
        scored = http.post(f"/experiments/{posted.json()['id']}/fidelity", json={"bootstrap": 100})
    assert scored.status_code == 200, scored.text
    accuracy = next(f for f in scored.json()["figures"] if f["metric"] == "accuracy" and f["group_by"] is None)
    assert accuracy["ci_low"] <= 0.8 <= accuracy["ci_high"] and accuracy["n"] == 300


def test_the_examples_notebook_runs_every_cell(tmp_path):
    import nbformat
    from nbclient import NotebookClient

    folder = copy_example(tmp_path)
    notebook = nbformat.read(folder / "fidelity.ipynb", as_version=4)
    assert all(not cell.get("outputs") for cell in notebook.cells if cell.cell_type == "code")  # kept clean
    root = str(EXAMPLE.parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    NotebookClient(notebook, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute(env=env)
    outputs = [o for cell in notebook.cells if cell.cell_type == "code" for o in cell.get("outputs", [])]
    assert not [o for o in outputs if o.output_type == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)  # real against simulated, drawn inline
    texts = "\n".join(str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    assert "accuracy" in texts and "design_effect" in texts


COEFFICIENT = re.compile(r"^(Intercept|age|yrs_married|religious)\s+(\S+)\s+\[(\S+), (\S+)\]\s+(\S+)\s+\[(\S+), (\S+)\]\s+"
                         r"(\S+)\s+(\S+)\s+(\S+)", re.MULTILINE)


def test_the_rehearsal_at_noise_0_gives_identical_regression_coefficients_from_the_cli_and_python(tmp_path):
    folder = copy_example(tmp_path)
    exact = folder / "fair-rehearsal-exact.yaml"
    exact.write_text((folder / "fair-rehearsal.yaml").read_text().replace("rehearse_noise: 0.2", "rehearse_noise: 0.0"))
    ran = polis_cli("run", str(exact), "--run-dir", "run", cwd=tmp_path)
    assert ran.returncode == 0 and "status: completed" in ran.stdout, ran.stdout + ran.stderr[-3000:]

    scored = polis_cli("fidelity", "run", "--bootstrap", "20", "--regression", "rate_marriage ~ age + yrs_married + religious",
                       cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr
    assert "regression fidelity: rate_marriage ~ age + yrs_married + religious (ols, 300 respondents" in scored.stdout
    rows = COEFFICIENT.findall(scored.stdout)
    assert [row[0] for row in rows] == ["Intercept", "age", "yrs_married", "religious"], scored.stdout
    for term, real, low, high, simulated, sim_low, sim_high, sign, significance, differs in rows:
        assert (real, low, high) == (simulated, sim_low, sim_high), term  # the same answers: the same fit
        assert (sign, significance, differs) == ("same", "same", "no"), term
    assert "slopes differing significantly: 0% of 3; sign flipped: 0 of 3" in scored.stdout

    with polis.Session(scheduler="in-process") as session:
        run = polis.open_run(tmp_path / "run", session=session)
        frame = run.regression_fidelity("rate_marriage ~ age + yrs_married + religious")
        assert frame.attrs["share_differ"] == 0 and frame.attrs["n"] == 300
        assert (frame["real"] == frame["simulated"]).all() and frame["sign_agrees"].all() and not frame["differs"].any()
        stored = run.sql("SELECT count(*) AS n FROM regression_fidelity").column("n")[0].as_py()
        assert stored == 4  # the CLI's and Python's fits of the same formula: one shard, the last one's rows
        run.close()

    unknown = polis_cli("fidelity", "run", "--regression", "rate_marriage ~ age + party", cwd=tmp_path)
    assert unknown.returncode == 2 and "'party' is neither a persona field nor a target item" in unknown.stderr
    every = " + ".join(f"C({f})" for f in ("age", "yrs_married", "children", "religious", "educ", "occupation",
                                            "occupation_husb"))
    few = polis_cli("fidelity", "run", "--regression", f"rate_marriage ~ {every}", cwd=tmp_path)
    assert few.returncode == 2 and "at least 10 respondents per coefficient" in few.stderr, few.stderr
    logit = polis_cli("fidelity", "run", "--regression", "rate_marriage ~ age", "--family", "logit", cwd=tmp_path)
    assert logit.returncode == 2 and "regression.family: a logit needs a binary target" in logit.stderr
