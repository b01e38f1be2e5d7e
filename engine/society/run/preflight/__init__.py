"""Preflight: before a run's first tick, check that every worker can do its part.

A worker that runs another Polis (or none), cannot see the run directory, or cannot reach an LLM
endpoint would otherwise fail agent-steps one by one (counted as agent statuses) or hang the run.
:func:`preflight` probes every worker once and refuses with :class:`PreflightError`, naming the
workers and the causes. :func:`check_llms` makes one test call per distinct model from the driver.

The decision is sans-IO: :func:`find_problems` takes what the driver expects (:class:`Expectation`)
and what the workers answered (:class:`WorkerProbe`) and returns the problems. :func:`preflight` is
the Dask shell around it.

The probe that runs on the workers (:func:`probe_worker`) uses the standard library only and is
shipped by value (cloudpickle), so a worker without Polis installed still answers, with its import
error. Limitation: the source hash is of the files on disk; a long-lived worker that imported
modules before the checkout was edited still holds the old code.
"""

from __future__ import annotations

from engine.society.run.preflight.decision import (
    Endpoint,
    Expectation,
    PolisIdentity,
    PreflightProblem,
    PreflightReport,
    WorkerProbe,
    endpoints_of,
    find_problems,
)
from engine.society.run.preflight.llm_call import check_llms, models_to_check
from engine.society.run.preflight.probe import netns_identity, polis_identity, probe_worker
from engine.society.run.preflight.shell import PREFLIGHT_DIR, preflight

__all__ = [
    "PREFLIGHT_DIR",
    "Endpoint",
    "Expectation",
    "PolisIdentity",
    "PreflightProblem",
    "PreflightReport",
    "WorkerProbe",
    "check_llms",
    "endpoints_of",
    "find_problems",
    "models_to_check",
    "netns_identity",
    "polis_identity",
    "preflight",
    "probe_worker",
]
