"""Fidelity: how close a run's simulated answers come to the real respondents' (:func:`fidelity`), and which setup of
a sweep comes closest (:func:`rank_sweep`)."""

from engine.fidelity.ranking import SetupScore, rank_sweep
from engine.fidelity.report import FIDELITY, FidelityReport, fidelity
from engine.fidelity.scoring import Figure

__all__ = ["FIDELITY", "FidelityReport", "Figure", "SetupScore", "fidelity", "rank_sweep"]
