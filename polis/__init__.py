"""Polis: batch experiments of LLM-agent social simulations on Dask.

    import polis
    run = polis.run("examples/demo.yaml")          # a LocalCluster by default; no __main__ guard needed
    run.df("actions").head()                        # any dataset as pandas (run.table(...): Arrow)
    run.sql("SELECT agent_id, count(*) FROM actions GROUP BY ALL")
    con = run.duckdb()                              # the run's views in your own DuckDB, beside your data

A :class:`Session` keeps one cluster client for many runs (``polis.Session(scheduler="tcp://host:8786")``);
the functions here use a default one made from the ``POLIS_*`` settings at their first call.
"""

from __future__ import annotations

from typing import Any

from engine.errors import (
    AgentNotFoundError,
    DatasetNotFoundError,
    FidelityError,
    NotARunError,
    PolisError,
    RunError,
    RunExistsError,
    SpecError,
    StorageError,
)
from engine.results import AgentMemory
from engine.run_progress import RunProgress
from engine.run_status import RunStatus
from engine.settings import EngineSettings
from engine.spec import (
    AgentSpec,
    AskStep,
    BudgetSpec,
    EnvironmentSpec,
    EnvModuleSpec,
    ExperimentSpec,
    InterveneStep,
    QuestionnaireStep,
    QuestionSpec,
    RunOptions,
    RunStep,
    SweepSpec,
)
from engine.storage.run_layout import RunLocation
from polis.remote import RemoteRun, RemoteSession, connect
from polis.runs import Run
from polis.session import PolisUsageError, RunFuture, Session, SpecLike, default_session

__all__ = [
    "AgentMemory",
    "AgentNotFoundError",
    "AgentSpec",
    "AskStep",
    "BudgetSpec",
    "DatasetNotFoundError",
    "EngineSettings",
    "EnvModuleSpec",
    "EnvironmentSpec",
    "ExperimentSpec",
    "FidelityError",
    "InterveneStep",
    "NotARunError",
    "PolisError",
    "PolisUsageError",
    "QuestionSpec",
    "QuestionnaireStep",
    "RemoteRun",
    "RemoteSession",
    "Run",
    "RunError",
    "RunExistsError",
    "RunFuture",
    "RunProgress",
    "RunStatus",
    "RunOptions",
    "RunStep",
    "Session",
    "SpecError",
    "StorageError",
    "SweepSpec",
    "arun",
    "connect",
    "open_run",
    "run",
    "submit",
]

__version__ = "0.1.0"


def run(spec: SpecLike, run_dir: RunLocation | None = None, *, progress: bool | None = None, overwrite: bool = False,
        **options: Any) -> Run:
    """Run a spec (an :class:`ExperimentSpec`, a dict, or a YAML/JSON path) on the default session; see :meth:`Session.run`.

    A ``run_dir`` that holds a run is refused (:class:`RunExistsError`) unless ``overwrite=True`` replaces it.
    """
    return default_session().run(spec, run_dir, progress=progress, overwrite=overwrite, **options)


async def arun(spec: SpecLike, run_dir: RunLocation | None = None, *, progress: bool | None = None, overwrite: bool = False,
               **options: Any) -> Run:
    """:func:`run` for async code."""
    return await default_session().arun(spec, run_dir, progress=progress, overwrite=overwrite, **options)


def submit(spec: SpecLike, run_dir: RunLocation | None = None, *, progress: bool | None = None, overwrite: bool = False,
           **options: Any) -> RunFuture:
    """Start a run on the default session and return its :class:`RunFuture` at once."""
    return default_session().submit(spec, run_dir, progress=progress, overwrite=overwrite, **options)


def open_run(location: RunLocation, *, session: Session | None = None) -> Run:
    """Open a stored run (a run directory, a store URL or a sweep root) on ``session`` (default: the default session),
    which its :meth:`~Run.fork`, :meth:`~Run.resume`, :meth:`~Run.ask` and :meth:`~Run.interview` run on.

    Raises:
        NotARunError: ``location`` holds no run and no sweep; the message says what it found there.
    """
    return (session if session is not None else default_session()).open_run(location)


# Re-homed: this package's own classes say ``polis`` (as httpx does). The engine's keep their modules: they
# are pickled to Dask workers by reference, and a worker must not need this package to read them.
for _cls in (Run, RunFuture, Session, PolisUsageError, RemoteRun, RemoteSession):
    _cls.__module__ = "polis"
del _cls
