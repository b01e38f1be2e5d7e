"""The offline rehearsal, end to end: a survey run on ``sim/rehearsal`` answers its target items from the real
answers, so fidelity is perfect at noise 0 and lands on its expected value at noise p; then the figures are a
dataset DuckDB reads."""

from __future__ import annotations

import numpy as np
import pytest

from engine.errors import FidelityError
from engine.fidelity import fidelity
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader

LABELS = {1: "very poor", 2: "poor", 3: "fair", 4: "good", 5: "very good"}
CODEBOOK = {
    "columns": {
        "party": {"role": "persona", "labels": {1: "left", 2: "right"}},
        "rate": {"role": "target", "question": "How do you rate your marriage?", "scale": "ordinal", "labels": LABELS},
        "trust": {"role": "target", "question": "Do you trust your neighbours?", "scale": "ordinal",
                  "labels": {0: "no", 1: "yes"}},
    },
}


def survey(n: int = 400) -> list[dict]:
    rng = np.random.default_rng(11)
    party = rng.integers(1, 3, n)
    rate = np.clip(party + rng.integers(1, 4, n), 1, 5)  # the right rate higher: a subgroup gap to find
    trust = (rng.random(n) < 0.4).astype(int)
    return [{"party": int(p), "rate": int(r), "trust": int(t)} for p, r, t in zip(party, rate, trust, strict=True)]


def rehearsal_spec(noise: float, rows: list[dict]) -> dict:
    return {
        "name": f"rehearse-{noise}", "seed": 4, "batch_size": 200,
        "llm": {"default": {"model": "sim/rehearsal", "extra": {"rehearse_noise": noise}}},
        "population": [{"rows": rows, "codebook": CODEBOOK}],
        "steps": [{"type": "questionnaire", "questionnaire_id": "survey", "from_survey": True}],
    }


async def test_noise_0_scores_perfectly_and_noise_p_as_expected(shell, tmp_path):
    rows = survey()
    exact = await run_experiment(parse_spec(rehearsal_spec(0.0, rows)), tmp_path / "exact", shell)
    noisy = await run_experiment(parse_spec(rehearsal_spec(0.3, rows)), tmp_path / "noisy", shell)
    assert exact.status == noisy.status == "completed", (exact.error, noisy.error)

    perfect = fidelity(tmp_path / "exact", by=["party"], bootstrap=100)
    for name in ("rate", "trust"):
        assert perfect.get(name, "accuracy").value == 1.0 and perfect.get(name, "tvd").value == 0.0
        assert perfect.get(name, "coverage").value == 1.0
    assert perfect.get("rate", "spearman").value == pytest.approx(1.0)
    assert perfect.get("rate", "wasserstein").value == 0.0 and perfect.get("*", "correlation_rmse") is not None

    found = fidelity(tmp_path / "noisy", by=["party"], bootstrap=300)
    for name in ("rate", "trust"):
        accuracy = found.get(name, "accuracy")
        assert accuracy.ci_low <= 0.7 <= accuracy.ci_high, (name, accuracy)
    # trust has two options, so a flipped answer is the other one: the expected distance follows from the real share
    yes = np.mean([r["trust"] for r in rows])
    expected = abs((0.7 * yes + 0.3 * (1 - yes)) - yes)
    trust_tvd = found.get("trust", "tvd")
    assert trust_tvd.ci_low <= expected <= trust_tvd.ci_high, (expected, trust_tvd)
    assert {f.group for f in found.figures if f.group_by == "party"} == {"left", "right"}

    with ReplayReader(tmp_path / "noisy") as reader:
        table = reader.query("SELECT item, metric, value, ci_low, ci_high FROM fidelity WHERE group_by IS NULL "
                             "AND metric = 'accuracy' ORDER BY item").to_pylist()
    assert [(r["item"], r["value"]) for r in table] == [("rate", found.get("rate", "accuracy").value),
                                                         ("trust", found.get("trust", "accuracy").value)]


async def test_a_run_without_a_survey_or_its_items_is_refused_by_name(shell, tmp_path):
    plain = {"name": "plain", "agents": [{"id": 0}], "steps": [{"type": "questionnaire", "questionnaire_id": "q",
                                                               "questions": [{"id": "x", "prompt": "X?"}]}]}
    await run_experiment(parse_spec(plain), tmp_path / "plain", shell)
    with pytest.raises(FidelityError, match="0 survey populations"):
        fidelity(tmp_path / "plain")
    unasked = {**rehearsal_spec(0.0, survey(20)), "steps": plain["steps"]}
    await run_experiment(parse_spec(unasked), tmp_path / "unasked", shell)
    with pytest.raises(FidelityError, match="no questionnaire of the run asked a target item"):
        fidelity(tmp_path / "unasked")


async def test_a_run_directory_used_again_rehearses_from_its_new_answers(shell, tmp_path):
    import shutil

    first = [{**row, "rate": 1} for row in survey(40)]  # every respondent: very poor
    second = [{**row, "rate": 5} for row in survey(40)]  # every respondent: very good
    await run_experiment(parse_spec(rehearsal_spec(0.0, first)), tmp_path / "run", shell)
    shutil.rmtree(tmp_path / "run")  # a notebook runs again into the same folder, in the same process
    await run_experiment(parse_spec(rehearsal_spec(0.0, second)), tmp_path / "run", shell)
    assert fidelity(tmp_path / "run", bootstrap=20).get("rate", "accuracy").value == 1.0
