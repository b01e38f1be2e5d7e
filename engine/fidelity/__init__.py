"""Fidelity: how close a run's simulated answers come to the real respondents' (:func:`fidelity`)."""

from engine.fidelity.report import FIDELITY, FidelityReport, fidelity
from engine.fidelity.scoring import Figure

__all__ = ["FIDELITY", "FidelityReport", "Figure", "fidelity"]
