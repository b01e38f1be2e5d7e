"""Raking against a worked example: a 2 x 2 sample raked to its margins keeps its odds ratio (what IPF converges
to), and the fit report's design effect and effective n are Kish's."""

from __future__ import annotations

import numpy as np
import pytest

from engine.population.calibrate import rake


def two_by_two() -> dict[str, list[str]]:
    # 100 respondents: men young 20, men old 30, women young 30, women old 20
    cells = [("m", "young")] * 20 + [("m", "old")] * 30 + [("f", "young")] * 30 + [("f", "old")] * 20
    return {"sex": [s for s, _ in cells], "age": [a for _, a in cells]}


def test_a_2x2_sample_is_raked_to_the_table_with_its_margins_and_odds_ratio():
    categories = two_by_two()
    weights, report = rake(categories, {"sex": {"m": 0.4, "f": 0.6}, "age": {"young": 0.5, "old": 0.5}}, np.ones(100))
    share = {cell: weights[[i for i in range(100) if (categories["sex"][i], categories["age"][i]) == cell]].sum() / 100
             for cell in [("m", "young"), ("m", "old"), ("f", "young"), ("f", "old")]}
    # By hand: p11 = a with a(0.1 + a) / ((0.4 - a)(0.5 - a)) = 4/9 (the sample's odds ratio 20*20 / (30*30)),
    # so 5a^2 + 4.5a - 0.8 = 0 and a = (-4.5 + sqrt(36.25)) / 10.
    a = (-4.5 + np.sqrt(36.25)) / 10
    assert share[("m", "young")] == pytest.approx(a, abs=1e-6)
    assert share[("m", "old")] == pytest.approx(0.4 - a, abs=1e-6)
    assert share[("f", "young")] == pytest.approx(0.5 - a, abs=1e-6)
    assert share[("f", "old")] == pytest.approx(0.1 + a, abs=1e-6)
    assert report.converged and report.max_error < 1e-6 and weights.mean() == pytest.approx(1.0)
    before = {(m.variable, m.category): m.before for m in report.margins}
    assert before[("sex", "m")] == pytest.approx(0.5) and before[("age", "young")] == pytest.approx(0.5)


def test_the_design_effect_and_effective_n_are_kishs():
    weights, report = rake({"g": ["a"] * 10 + ["b"] * 30}, {"g": {"a": 0.5, "b": 0.5}}, np.ones(40))
    # a's 10 respondents carry half: weight 2 each; b's 30 carry the other half: 2/3 each
    assert weights[:10] == pytest.approx([2.0] * 10) and weights[10:] == pytest.approx([2 / 3] * 30)
    squares = 10 * 4 + 30 * 4 / 9
    assert report.design_effect == pytest.approx(40 * squares / 40**2)
    assert report.effective_n == pytest.approx(40**2 / squares) and report.n == 40


def test_categories_without_a_target_or_targets_without_a_respondent_are_refused():
    with pytest.raises(ValueError, match="a respondent's 'c' has no target share"):
        rake({"g": ["a", "c"]}, {"g": {"a": 0.5, "b": 0.5}}, np.ones(2))
    with pytest.raises(ValueError, match="no respondent is 'b'"):
        rake({"g": ["a", "a"]}, {"g": {"a": 0.5, "b": 0.5}}, np.ones(2))


# ---- in a spec and a run ------------------------------------------------------------------------------------

def calibrated_spec(calibrate: dict, count: int = 60) -> dict:
    rows = [{"rid": i, "sex": 1 + (i % 3 == 0), "rate": 1 + i % 3} for i in range(90)]  # a third are women
    codebook = {"columns": {"rid": {"role": "id"}, "sex": {"role": "persona", "labels": {1: "man", 2: "woman"}},
                            "rate": {"role": "target", "question": "Rate?", "labels": {1: "low", 2: "mid", 3: "high"}}}}
    return {"name": "calibrated", "seed": 5,
            "population": [{"rows": rows, "codebook": codebook, "count": count, "sample": "random", "calibrate": calibrate}],
            "steps": [{"type": "questionnaire", "questionnaire_id": "q", "from_survey": True}]}


def test_weight_mode_rakes_the_members_and_draw_mode_draws_them():
    from engine.spec import parse_spec

    weighted = parse_spec(calibrated_spec({"marginals": {"sex": {"man": 0.5, "woman": 0.5}}}))
    indexes, weights, report = weighted.population[0].survey_members(weighted.population_seed_key(0))
    women = [w for i, w in zip(indexes, weights, strict=True) if i % 3 == 0]
    assert len(indexes) == 60 and sum(women) == pytest.approx(30.0) and report.max_error < 1e-6
    assert report.design_effect > 1 and report.effective_n < 60

    drawn = parse_spec(calibrated_spec({"marginals": {"sex": {"man": 0.5, "woman": 0.5}}, "mode": "draw"}))
    indexes, weights, _ = drawn.population[0].survey_members(drawn.population_seed_key(0))
    assert len(indexes) == 60 and set(weights) == {1.0} and indexes == sorted(indexes)
    # women were a third of the rows; drawn by raked weight they are about half of the members
    assert 22 <= sum(1 for i in indexes if i % 3 == 0) <= 38


@pytest.mark.parametrize(("calibrate", "says"), [
    ({"marginals": {"age": {"x": 1.0}}}, "calibrate.marginals.age: not a persona field"),
    ({"marginals": {"sex": {"man": 0.5, "child": 0.5}}}, "'child' is none of its labels"),
    ({"marginals": {"sex": {"man": 0.5, "woman": 0.4}}}, "the shares sum to 0.9, not 1"),
])
def test_a_marginal_that_cannot_be_used_is_refused_naming_it(calibrate, says):
    from engine.errors import SpecError
    from engine.spec import parse_spec

    with pytest.raises(SpecError, match=says):
        parse_spec(calibrated_spec(calibrate))


async def test_a_calibrated_run_weighs_its_members_and_writes_the_fit(shell, tmp_path):
    from engine.society.run.runner import run_experiment
    from engine.spec import parse_spec
    from engine.storage.reader import ReplayReader

    spec = parse_spec(calibrated_spec({"marginals": {"sex": {"man": 0.5, "woman": 0.5}}}))
    assert (await run_experiment(spec, tmp_path / "run", shell)).status == "completed"
    with ReplayReader(tmp_path / "run") as reader:
        women = reader.query("SELECT sum(weight) AS w FROM agent_profiles WHERE profile->>'sex' = 'woman'").column("w")[0].as_py()
        fit = reader.query("SELECT category, target, after, design_effect FROM calibration ORDER BY category").to_pylist()
        real = reader.query("SELECT DISTINCT weight FROM survey_answers").column("weight").to_pylist()
    assert women == pytest.approx(30.0)
    assert [(f["category"], f["target"]) for f in fit] == [("man", 0.5), ("woman", 0.5)]
    assert all(f["after"] == pytest.approx(0.5) and f["design_effect"] > 1 for f in fit)
    assert len(real) == 2  # the raked weights reach the real answers, so fidelity is weighted by them


def test_members_that_cannot_be_raked_are_refused_at_the_calibrate_field():
    from engine.errors import SpecError
    from engine.spec import parse_spec

    spec = calibrated_spec({"marginals": {"sex": {"man": 0.5, "woman": 0.5}}})
    spec["population"][0]["rows"] = [{**row, "sex": 1} for row in spec["population"][0]["rows"]]  # no woman at all
    with pytest.raises(SpecError) as caught:
        parse_spec(spec)
    assert caught.value.path == "population.0.calibrate" and "no respondent is 'woman'" in str(caught.value)


# ---- mode: draw draws with probability proportional to the raked weight --------------------------------------

def pool_spec(count: int, seed: int, draw: str | None = None) -> dict:
    """Issue 51's example: a pool of 1,000 rows, 30% in A, raked to 70% A, ``count`` members drawn."""
    rows = [{"rid": i, "grp": 1 if i < 300 else 2, "rate": 1 + i % 3} for i in range(1000)]
    codebook = {"columns": {"rid": {"role": "id"}, "grp": {"role": "persona", "labels": {1: "A", 2: "B"}},
                            "rate": {"role": "target", "question": "Rate?", "labels": {1: "low", 2: "mid", 3: "high"}}}}
    calibrate = {"marginals": {"grp": {"A": 0.7, "B": 0.3}}, "mode": "draw", **({"draw": draw} if draw else {})}
    return {"name": "pool", "seed": seed,
            "population": [{"rows": rows, "codebook": codebook, "count": count, "calibrate": calibrate}],
            "steps": [{"type": "questionnaire", "questionnaire_id": "q", "from_survey": True}]}


def drawn(count: int, seed: int, draw: str | None = None) -> tuple[list[int], object]:
    from engine.spec import parse_spec

    spec = parse_spec(pool_spec(count, seed, draw))
    indexes, weights, report = spec.population[0].survey_members(spec.population_seed_key(0))
    assert len(indexes) == count and set(weights) == {1.0}
    return indexes, report


@pytest.mark.parametrize("count", [100, 300])
def test_a_systematic_draw_hits_the_raked_share_on_average(count):
    # Drawn one after another from the rows left (rng.choice(replace=False, p=w)), 100 members were 67.7% A and
    # 300 were 62.0% (means over these 200 seeds): the later draws come from the B rows the weights disfavour.
    # pi_A = count * 0.7 / 300 <= 1 here. A share's sd is at most 0.046 per draw, 0.0033 over 200 draws.
    shares = []
    for seed in range(200):
        indexes, report = drawn(count, seed)
        assert len(set(indexes)) == count  # no row twice
        shares.append(sum(1 for i in indexes if i < 300) / count)
        assert report.converged and [m.after for m in report.margins] == pytest.approx([shares[-1], 1 - shares[-1]])
    assert np.mean(shares) == pytest.approx(0.70, abs=0.012)


def test_a_draw_that_cannot_reach_its_margins_says_so_and_one_with_replacement_reaches_them():
    # 600 members, 70% A: 420 A members from 300 A rows. Without replacement every A row is taken (pi = 1) and the
    # members are 50% A, the most there is (the sequential draw gave 48% and reported 70%); the report says it fell
    # short. With replacement an A row may stand for two members, and the share is 70% on average.
    indexes, report = drawn(600, 0)
    assert sum(1 for i in indexes if i < 300) == 300
    assert not report.converged and report.max_error == pytest.approx(0.2)
    assert [(m.category, m.target, m.after) for m in report.margins] == [("A", 0.7, 0.5), ("B", 0.3, 0.5)]
    shares = []
    for seed in range(50):
        indexes, report = drawn(600, seed, "with_replacement")
        shares.append(sum(1 for i in indexes if i < 300) / 600)
        assert report.converged and len(set(indexes)) < 600  # some rows drawn twice: two members each
    assert np.mean(shares) == pytest.approx(0.70, abs=0.02)


def test_the_calibration_rows_describe_the_members_drawn():
    from engine.society.run.profiles import calibration_rows
    from engine.spec import parse_spec

    rows = calibration_rows(parse_spec(pool_spec(600, 0)), "r")
    assert [(r["category"], r["target"], r["after"]) for r in rows] == [("A", 0.7, 0.5), ("B", 0.3, 0.5)]
    assert all(r["before"] == pytest.approx(r["category"] == "A" and 0.3 or 0.7) for r in rows)  # the pool's own
    # every member weighs 1: Kish's design effect is 1, not the raked pool's (1.76 here, which the rows gave before)
    assert {(r["design_effect"], r["effective_n"], r["respondents"], r["converged"]) for r in rows} == {(1.0, 600.0, 1000, False)}
    again = calibration_rows(parse_spec(pool_spec(600, 0, "with_replacement")), "r")
    indexes, _ = drawn(600, 0, "with_replacement")
    times = np.unique(indexes, return_counts=True)[1]
    assert again[0]["design_effect"] == pytest.approx(len(times) * (times**2).sum() / 600**2)  # over the distinct rows
    assert again[0]["after"] == pytest.approx(sum(1 for i in indexes if i < 300) / 600)


def test_inclusion_probabilities_take_heavy_rows_for_sure_and_share_the_rest():
    from engine.population.members import draw_by_weight, inclusion_probabilities

    weights = np.array([8, 4, 2, 1, 1, 1, 1, 1, 1], dtype=float)
    # By hand: c = 4/20 puts row 0 at 1.6, so it is taken; c = 3/12 puts row 1 at 1, taken; c = 2/8 for the rest.
    expected = [1, 1, 0.5] + [0.25] * 6
    assert inclusion_probabilities(weights, 4) == pytest.approx(expected)
    counts = np.zeros(len(weights))
    for seed in range(4000):
        rows, _ = draw_by_weight(weights, 4, "systematic", np.random.default_rng(seed))
        assert len(set(rows)) == 4
        counts[rows] += 1
    # each row's share of the draws is its inclusion probability (sd at most 0.008 over 4,000 draws)
    assert np.abs(counts / 4000 - expected).max() < 0.03
    with pytest.raises(ValueError, match="only 2 rows have a weight above 0"):
        inclusion_probabilities(np.array([1.0, 0.0, 2.0]), 3)


def test_the_same_seed_draws_the_same_members_and_draw_needs_mode_draw():
    from engine.errors import SpecError
    from engine.spec import parse_spec

    assert drawn(100, 3)[0] == drawn(100, 3)[0] and drawn(100, 3)[0] != drawn(100, 4)[0]
    assert drawn(100, 3, "with_replacement")[0] == drawn(100, 3, "with_replacement")[0]
    spec = calibrated_spec({"marginals": {"sex": {"man": 0.5, "woman": 0.5}}, "draw": "with_replacement"})
    with pytest.raises(SpecError, match="draw: with_replacement chooses how mode draw draws; this calibration's mode is weight"):
        parse_spec(spec)
    assert "draw" not in parse_spec(pool_spec(100, 0)).population[0].calibrate.model_dump()  # stored specs keep their hash
