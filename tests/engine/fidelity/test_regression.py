"""Regression fidelity, sans-IO: the coefficients are statsmodels' formula API's on the same data (and the logit's
weighted sandwich a hand-computed one), identical answers agree on everything, the z-test is the textbook one, and
bad input is refused naming the column or the reason."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from engine.errors import FidelityError, SpecError
from engine.fidelity.regression import RegressionData, fit
from engine.spec_regression import parse_formula, regression_spec

RELIGIOUS = ("not religious", "mildly religious", "fairly religious", "strongly religious")


@pytest.fixture(scope="module")
def fair():
    import statsmodels.api as sm

    data = sm.datasets.fair.load_pandas().data.sample(1500, random_state=5).reset_index(drop=True)
    data["religion"] = [RELIGIOUS[int(r) - 1] for r in data["religious"]]
    data["weight"] = np.random.default_rng(3).uniform(0.3, 3.0, len(data))
    data["affair"] = (data["affairs"] > 0).astype(float)
    return data


def columns(frame, names):
    from pandas.api.types import is_numeric_dtype

    return {name: frame[name].to_numpy(dtype=float) if is_numeric_dtype(frame[name]) else frame[name].to_numpy(dtype=object)
            for name in names}


def test_ols_coefficients_and_hc1_intervals_are_statsmodels_formula_apis_on_the_same_data(fair):
    import statsmodels.formula.api as smf

    # the simulated side: the real answers shuffled, so the two fits differ
    simulated = fair.assign(rate_marriage=np.random.default_rng(1).permutation(fair["rate_marriage"].to_numpy()))
    names = ["rate_marriage", "age", "yrs_married", "religion"]
    data = RegressionData(real=columns(fair, names), simulated=columns(simulated, names),
                          weights=fair["weight"].to_numpy(), levels={"religion": RELIGIOUS})
    report = fit(parse_formula("rate_marriage ~ age + yrs_married + C(religion)"), "ols", data)

    levels = f"C(religion, levels={list(RELIGIOUS)})"
    for frame, side in ((fair, "real"), (simulated, "simulated")):
        reference = smf.wls(f"rate_marriage ~ age + yrs_married + {levels}", frame, weights=frame["weight"]).fit(cov_type="HC1")
        ours = [name.replace(f"{levels}[T.", "religion=").rstrip("]") for name in reference.params.index]
        expected = dict(zip(ours, zip(reference.params, reference.conf_int().to_numpy(), reference.pvalues, strict=True),
                            strict=True))
        assert set(expected) == {c.term for c in report.coefficients}
        for c in report.coefficients:
            b, (low, high), p = expected[c.term]
            assert getattr(c, side) == pytest.approx(b, rel=1e-9)
            assert (getattr(c, f"{side}_low"), getattr(c, f"{side}_high")) == pytest.approx((low, high), rel=1e-9)
            assert getattr(c, f"{side}_p") == pytest.approx(p, rel=1e-6)
    assert report.n == len(fair) and [c.term for c in report.coefficients][:3] == ["Intercept", "age", "yrs_married"]

    # the difference test by hand: z = (b_r - b_s) / sqrt(se_r^2 + se_s^2)
    age = next(c for c in report.coefficients if c.term == "age")
    se_r, se_s = ((high - low) / (2 * norm.ppf(0.975)) for low, high in ((age.real_low, age.real_high),
                                                                         (age.simulated_low, age.simulated_high)))
    z = (age.real - age.simulated) / np.hypot(se_r, se_s)
    assert age.difference_p == pytest.approx(2 * norm.sf(abs(z))) and age.differs == (age.difference_p < 0.05)
    # shuffled answers: the slopes vanish, so the strongly significant real ones differ
    assert report.share_differ is not None and report.share_differ > 0


def test_the_weighted_logit_is_the_pseudo_likelihood_with_a_hand_computed_hc1_sandwich(fair):
    names = ["affair", "age", "religious"]
    data = RegressionData(real=columns(fair, names), simulated=columns(fair, names), weights=fair["weight"].to_numpy(),
                          levels={})
    report = fit(parse_formula("affair ~ age + religious"), "logit", data)

    # Newton's method on the weighted log-likelihood, then the sandwich (X'WVX)^-1 (sum w^2 e^2 x x') (X'WVX)^-1 (HC0)
    x = np.column_stack([np.ones(len(fair)), fair["age"], fair["religious"]])
    y, w = fair["affair"].to_numpy(), fair["weight"].to_numpy() / fair["weight"].mean()
    b = np.zeros(3)
    for _ in range(50):
        p = 1 / (1 + np.exp(-x @ b))
        b = b + np.linalg.solve(x.T @ (x * (w * p * (1 - p))[:, None]), x.T @ (w * (y - p)))
    p = 1 / (1 + np.exp(-x @ b))
    bread = np.linalg.inv(x.T @ (x * (w * p * (1 - p))[:, None]))
    meat = (x * (w * (y - p))[:, None]).T @ (x * (w * (y - p))[:, None])
    se = np.sqrt(np.diag(bread @ meat @ bread))
    for j, c in enumerate(report.coefficients):
        assert c.real == pytest.approx(b[j], rel=1e-7)
        assert (c.real_high - c.real_low) / 2 == pytest.approx(norm.ppf(0.975) * se[j], rel=1e-6)


def test_identical_answers_agree_on_every_coefficient(fair):
    names = ["rate_marriage", "age", "religion"]
    data = RegressionData(real=columns(fair, names), simulated=columns(fair, names), weights=fair["weight"].to_numpy(),
                          levels={"religion": RELIGIOUS})
    report = fit(parse_formula("rate_marriage ~ age + C(religion)"), "ols", data)
    for c in report.coefficients:
        assert (c.real, c.real_low, c.real_high) == (c.simulated, c.simulated_low, c.simulated_high)
        assert c.sign_agrees and c.significance_agrees and c.differs is False and c.difference_p == 1.0
    assert report.share_differ == 0 and report.share_sign_flipped == 0
    assert "slopes differing significantly: 0% of 4; sign flipped: 0 of 4" in report.text()


def test_a_collinear_design_is_refused_naming_the_column_that_adds_nothing(fair):
    frame = fair.assign(months=fair["yrs_married"] * 12)
    names = ["rate_marriage", "yrs_married", "months"]
    data = RegressionData(real=columns(frame, names), simulated=columns(frame, names), weights=frame["weight"].to_numpy(),
                          levels={})
    with pytest.raises(SpecError, match=r"collinear in the real answers: 'months' is a linear combination of "
                                        r"Intercept, yrs_married") as refused:
        fit(parse_formula("rate_marriage ~ yrs_married + months"), "ols", data)
    assert refused.value.path == "regression.formula"
    constant = frame.assign(one=1.0)
    data = RegressionData(real=columns(constant, ["rate_marriage", "one"]), simulated=columns(constant, ["rate_marriage", "one"]),
                          weights=frame["weight"].to_numpy(), levels={})
    with pytest.raises(SpecError, match="'one' is a linear combination of Intercept"):
        fit(parse_formula("rate_marriage ~ one"), "ols", data)


def test_fewer_than_ten_respondents_per_coefficient_is_refused_with_the_counts(fair):
    small = fair.iloc[:39]
    names = ["rate_marriage", "age", "religion"]
    data = RegressionData(real=columns(small, names), simulated=columns(small, names), weights=small["weight"].to_numpy(),
                          levels={"religion": RELIGIOUS})
    with pytest.raises(SpecError, match=r"39 respondents .* for 5 coefficients .* at least 10 respondents per "
                                        r"coefficient \(50\)") as refused:
        fit(parse_formula("rate_marriage ~ age + C(religion)"), "ols", data)
    assert refused.value.path == "regression.formula"
    assert fit(parse_formula("rate_marriage ~ age"), "ols", RegressionData(
        real=columns(small, names), simulated=columns(small, names), weights=small["weight"].to_numpy(), levels={})).n == 39


def test_a_logit_of_answers_all_one_answer_is_an_error_not_a_coefficient(fair):
    names = ["affair", "age"]
    data = RegressionData(real=columns(fair, names), simulated=columns(fair.assign(affair=0.0), names),
                          weights=fair["weight"].to_numpy(), levels={})
    with pytest.raises(FidelityError, match="simulated answers to 'affair' are all one answer"):
        fit(parse_formula("affair ~ age"), "logit", data)


@pytest.mark.parametrize(("formula", "message"), [
    ("rate_marriage", "is no formula"),
    ("rate_marriage ~ age * religious", "'age \\* religious' is no column"),
    ("rate_marriage ~ age + age", "'age' is named twice"),
    ("rate_marriage ~ log(age)", "'log\\(age\\)' is no column"),
])
def test_a_formula_that_does_not_parse_is_a_spec_error_at_regression_formula(formula, message):
    with pytest.raises(SpecError, match=message) as refused:
        regression_spec(formula)
    assert refused.value.path == "regression.formula"
    with pytest.raises(SpecError) as family:
        regression_spec("rate_marriage ~ age", "probit")
    assert family.value.path == "regression.family"
    assert regression_spec(" rate_marriage~age+C( religious ) ").formula == "rate_marriage ~ age + C(religious)"
