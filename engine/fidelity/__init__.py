"""Fidelity: how close a run's simulated answers come to the real respondents' (:func:`fidelity`), whether a regression
fitted on them finds the real relationships (:func:`regression_fidelity`), and which setup of a sweep comes closest
(:func:`rank_sweep`)."""

from engine.fidelity.ranking import SetupScore, rank_sweep
from engine.fidelity.regression import Coefficient, RegressionReport
from engine.fidelity.report import FIDELITY, REGRESSION_FIDELITY, FidelityReport, fidelity, regression_fidelity
from engine.fidelity.scoring import Figure
from engine.spec_regression import RegressionSpec, regression_spec

__all__ = [
    "FIDELITY",
    "REGRESSION_FIDELITY",
    "Coefficient",
    "FidelityReport",
    "Figure",
    "RegressionReport",
    "RegressionSpec",
    "SetupScore",
    "fidelity",
    "rank_sweep",
    "regression_fidelity",
    "regression_spec",
]
