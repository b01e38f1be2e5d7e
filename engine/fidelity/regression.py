"""Regression fidelity: one regression fitted on the real answers and on the simulated ones, coefficient by coefficient.

Means can agree while relationships do not: Bisbee et al. (2024, "Synthetic replacements for human survey data? The
perils of large language models", *Political Analysis*) found 48% of regression coefficients on ANES thermometers
differing significantly between real and synthetic respondents, and 32% with the sign flipped. A
:class:`~engine.spec_regression.RegressionSpec` names a regression over persona fields (and other target items), ``target ~ a + b + C(c)``;
:func:`fit` fits it twice on the same respondents, once with their real answers and once with their agents'
simulated ones, and compares each coefficient.

Sans-IO: :func:`fit` takes the respondents' values (:class:`RegressionData`), which
:func:`engine.fidelity.report.regression_fidelity` reads from a run.

The fits (statsmodels, imported when a regression is fitted):

- ``family: ols``: weighted least squares with the survey weights, the target as its scale step (1 for the first
  label, 2 for the next ...); an ordinal item, or a binary one (a linear probability model).
- ``family: logit``: a binomial GLM (the logit) with the survey weights as ``var_weights``, for a binary target
  (1: its second label).
- Either way the standard errors are the sandwich (robust) ones, HC1 for WLS (with the ``n / (n - k)`` factor) and
  HC0 for the logit (statsmodels applies no small-sample factor to a GLM's): with probability weights, the
  model-based variance of WLS or a weighted GLM is wrong (it treats the weights as precisions or counts), and the
  sandwich is the usual pseudo-likelihood variance (Stata's ``pweight``), here without strata or clusters. With
  equal weights the estimates are plain OLS and logit, the standard errors heteroskedasticity-robust. Intervals are the normal 95% ones, ``estimate ± 1.96 se``.

Per coefficient: both estimates with their intervals and p-values, whether their signs agree, whether they agree on
significance (both p < 0.05, or both not), and whether they **differ significantly**: a z-test on the difference,
``(b_real - b_sim) / sqrt(se_real² + se_sim²)``, p < 0.05. The test treats the two fits as independent. They are
not: the simulated answers come from personas of the same respondents, so the two estimates are positively
correlated and the test is conservative (it finds too few differences); read it as approximate. The shares
(:attr:`RegressionReport.share_differ`, :attr:`RegressionReport.share_sign_flipped`) are over the slopes, not the
intercept.

Bad input is refused before anything is fitted, as a :class:`~engine.errors.SpecError` at ``regression.formula``
(or ``regression.family``) naming the column or the reason: a formula that does not parse or names a column twice,
a column that is neither a persona field nor a target, a perfectly collinear design (checked by the design
matrix's rank; the error names the first column that adds nothing), or fewer than :data:`MIN_PER_COEFFICIENT`
respondents per coefficient. A logit that cannot be fitted (the answers separate perfectly, or are all one answer)
is a :class:`~engine.errors.FidelityError`: no coefficient is ever made up.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from engine.errors import FidelityError, SpecError
from engine.spec_regression import FORMULA_PATH, Formula

__all__ = ["INTERCEPT", "MIN_PER_COEFFICIENT", "Coefficient", "RegressionData", "RegressionReport", "fit"]

#: The fewest respondents per coefficient a regression is fitted with.
MIN_PER_COEFFICIENT = 10
#: The intercept's term name.
INTERCEPT = "Intercept"

_Z95 = 1.959963984540054
_ALPHA = 0.05


@dataclass(frozen=True)
class RegressionData:
    """The respondents of one regression: each formula column's values among the real answers and the simulated ones.

    A numeric column is a float array (nan: no value); a categorical one an object array (None: no value) with its
    values in order in ``levels`` (the first one present is the baseline). A persona field has the same values in
    both; a target item (the regression's target, or another on the right) has its real answers in ``real`` and the
    agents' answers in ``simulated``.
    """

    real: Mapping[str, np.ndarray]
    simulated: Mapping[str, np.ndarray]
    weights: np.ndarray  #: each respondent's survey weight
    levels: Mapping[str, tuple[Any, ...]]  #: categorical column -> its values in order


@dataclass(frozen=True)
class Coefficient:
    """One coefficient, as the real answers and the simulated ones estimate it (95% normal intervals)."""

    term: str
    real: float
    real_low: float
    real_high: float
    real_p: float | None  #: None: the estimate has no standard error (a constant target)
    simulated: float
    simulated_low: float
    simulated_high: float
    simulated_p: float | None
    difference_p: float | None  #: the z-test of real = simulated (approximate: see the module's docstring)
    sign_agrees: bool
    significance_agrees: bool | None  #: both p < 0.05 or both not; None: a p-value is missing
    differs: bool | None  #: difference_p < 0.05


@dataclass(frozen=True)
class RegressionReport:
    """One regression fitted on the real and on the simulated answers of the same ``n`` respondents."""

    formula: str
    family: str
    n: int
    coefficients: tuple[Coefficient, ...]

    @property
    def slopes(self) -> tuple[Coefficient, ...]:
        return tuple(c for c in self.coefficients if c.term != INTERCEPT)

    @property
    def share_differ(self) -> float | None:
        """The share of slopes that differ significantly (None: no slope has a test)."""
        tested = [c.differs for c in self.slopes if c.differs is not None]
        return sum(tested) / len(tested) if tested else None

    @property
    def share_sign_flipped(self) -> float:
        """The share of slopes whose sign the simulated answers flip."""
        return sum(not c.sign_agrees for c in self.slopes) / len(self.slopes)

    def rows(self) -> list[dict[str, Any]]:
        return [{"formula": self.formula, "family": self.family, "n": self.n, **asdict(c)} for c in self.coefficients]

    def text(self) -> str:
        """The coefficients side by side, then the shares."""
        def num(value: float | None) -> str:
            return "-" if value is None else f"{value:.3f}"

        def agree(value: bool | None, otherwise: str) -> str:
            return "-" if value is None else ("same" if value else otherwise)

        width = max(12, *(len(c.term) for c in self.coefficients))
        errors = "HC1" if self.family == "ols" else "HC0"
        lines = [f"regression fidelity: {self.formula} ({self.family}, {self.n} respondents, 95% intervals, {errors} errors)",
                 f"{'term':<{width}} {'real':>8}  {'95% CI':<18} {'simulated':>9}  {'95% CI':<18} {'sign':<7} "
                 f"{'signif.':<7} {'differs (p)'}"]
        for c in self.coefficients:
            differs = "-" if c.differs is None else f"{'YES' if c.differs else 'no'} ({num(c.difference_p)})"
            real_ci, simulated_ci = f"[{num(c.real_low)}, {num(c.real_high)}]", f"[{num(c.simulated_low)}, {num(c.simulated_high)}]"
            lines.append(f"{c.term:<{width}} {num(c.real):>8}  {real_ci:<18} {num(c.simulated):>9}  {simulated_ci:<18} "
                         f"{agree(c.sign_agrees, 'FLIPPED'):<7} {agree(c.significance_agrees, 'DIFFERS'):<7} {differs}")
        share = self.share_differ
        flipped = sum(not c.sign_agrees for c in self.slopes)
        lines.append(f"slopes differing significantly: {'-' if share is None else f'{share:.0%}'} of {len(self.slopes)}; "
                     f"sign flipped: {flipped} of {len(self.slopes)}")
        return "\n".join(lines)


def _present(values: np.ndarray) -> np.ndarray:
    if values.dtype == object:
        return np.array([v is not None for v in values], dtype=bool)
    return np.isfinite(values.astype(float))


def _design(formula: Formula, columns: Mapping[str, np.ndarray], levels: Mapping[str, list[Any]],
            keep: np.ndarray) -> tuple[np.ndarray, list[str], list[str]]:
    """The design matrix of the kept rows, its column names, and the formula column each comes from."""
    blocks, names, origins = [np.ones(int(keep.sum()))], [INTERCEPT], [INTERCEPT]
    for term in formula.terms:
        values = columns[term.field][keep]
        if term.field in levels:
            for level in levels[term.field][1:]:
                blocks.append(np.array([v == level for v in values], dtype=float))
                names.append(f"{term.field}={level}")
                origins.append(term.field)
        else:
            blocks.append(values.astype(float))
            names.append(term.field)
            origins.append(term.field)
    return np.column_stack(blocks), names, origins


def _check_rank(design: np.ndarray, names: list[str], which: str) -> None:
    for j in range(1, design.shape[1] + 1):
        if np.linalg.matrix_rank(design[:, :j]) < j:
            earlier = ", ".join(names[:j - 1])
            raise SpecError(f"the design is perfectly collinear in the {which} answers: {names[j - 1]!r} is a linear "
                            f"combination of {earlier} (a constant column, a duplicate, or dummies that add up to "
                            "another): drop it or a column it repeats", FORMULA_PATH)


def _fit_one(y: np.ndarray, design: np.ndarray, weights: np.ndarray, family: str, which: str,
             target: str) -> tuple[np.ndarray, np.ndarray]:
    import statsmodels.api as sm
    from statsmodels.tools.sm_exceptions import ConvergenceWarning, PerfectSeparationWarning

    if family == "ols":
        result = sm.WLS(y, design, weights=weights).fit(cov_type="HC1")
        return np.asarray(result.params, dtype=float), np.asarray(result.bse, dtype=float)
    if len(set(y.tolist())) < 2:
        raise FidelityError(f"the {which} answers to {target!r} are all one answer: a logit cannot be fitted on them")
    with warnings.catch_warnings():
        warnings.simplefilter("error", PerfectSeparationWarning)
        warnings.simplefilter("error", ConvergenceWarning)
        try:
            model = sm.GLM(y, design, family=sm.families.Binomial(), var_weights=weights)
            result = model.fit(cov_type="HC0")  # statsmodels' HC1 of a GLM is its HC0: no n/(n-k) factor
        except (PerfectSeparationWarning, ConvergenceWarning) as error:
            raise FidelityError(f"the logit of the {which} answers to {target!r} cannot be fitted: the answers "
                                f"separate perfectly or it does not converge ({error})") from None
    return np.asarray(result.params, dtype=float), np.asarray(result.bse, dtype=float)


def _p(estimate: float, se: float) -> float | None:
    from scipy.stats import norm

    return float(2 * norm.sf(abs(estimate) / se)) if se > 0 else None


def fit(formula: Formula, family: str, data: RegressionData) -> RegressionReport:
    """Fit ``formula`` on the real and on the simulated answers of the respondents with every value of it.

    Args:
        formula: the regression; each of its columns is in ``data``.
        family: ``ols`` or ``logit`` (the target's values are then 0 and 1).
        data: the respondents' values.

    Returns:
        Each coefficient side by side, the intercept first.

    Raises:
        SpecError: a collinear design, or fewer than :data:`MIN_PER_COEFFICIENT` respondents per coefficient.
        FidelityError: a logit that cannot be fitted.
    """
    names = [formula.target, *(t.field for t in formula.terms)]
    keep = np.asarray(data.weights, dtype=float) > 0
    for name in names:
        keep &= _present(data.real[name]) & _present(data.simulated[name])
    levels: dict[str, list[Any]] = {}
    for name, order in data.levels.items():
        seen = {v for side in (data.real, data.simulated) for v in side[name][keep]}
        levels[name] = [level for level in order if level in seen]
    real_x, columns, _ = _design(formula, data.real, levels, keep)
    simulated_x, _, _ = _design(formula, data.simulated, levels, keep)
    n, k = int(keep.sum()), len(columns)
    if n < MIN_PER_COEFFICIENT * k:
        raise SpecError(f"{n} respondents have every value of {formula.text!r}, for {k} coefficients "
                        f"({', '.join(columns)}): a regression needs at least {MIN_PER_COEFFICIENT} respondents per "
                        f"coefficient ({MIN_PER_COEFFICIENT * k}); drop a column or score more respondents", FORMULA_PATH)
    _check_rank(real_x, columns, "real")
    _check_rank(simulated_x, columns, "simulated")
    weights = np.asarray(data.weights, dtype=float)[keep]
    weights = weights / weights.mean()
    fits = [_fit_one(np.asarray(side[formula.target], dtype=float)[keep], x, weights, family, which, formula.target)
            for side, x, which in ((data.real, real_x, "real"), (data.simulated, simulated_x, "simulated"))]
    (real_b, real_se), (sim_b, sim_se) = fits
    coefficients = []
    for j, term in enumerate(columns):
        rb, rs, sb, ss = float(real_b[j]), float(real_se[j]), float(sim_b[j]), float(sim_se[j])
        rp, sp = _p(rb, rs), _p(sb, ss)
        spread = math.hypot(rs, ss)
        dp = _p(rb - sb, spread)
        coefficients.append(Coefficient(
            term=term, real=rb, real_low=rb - _Z95 * rs, real_high=rb + _Z95 * rs, real_p=rp,
            simulated=sb, simulated_low=sb - _Z95 * ss, simulated_high=sb + _Z95 * ss, simulated_p=sp,
            difference_p=dp, sign_agrees=bool(np.sign(rb) == np.sign(sb)),
            significance_agrees=None if rp is None or sp is None else (rp < _ALPHA) == (sp < _ALPHA),
            differs=None if dp is None else dp < _ALPHA))
    return RegressionReport(formula.text, family, n, tuple(coefficients))
