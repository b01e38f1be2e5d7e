"""A Session: one settings tree and one Dask client, on a loop thread of its own, reused by every run.

Runs are driven on the session's own event loop thread (as the service drives its runs on
``engine.engine_loop.EngineLoop``), so the synchronous :meth:`Session.run` works the same in a script, in a
REPL and in a Jupyter cell, whose kernel already runs an event loop on the main thread. Async code awaits
:meth:`Session.arun` instead; :meth:`Session.submit` returns a :class:`RunFuture` at once.

A script needs no ``if __name__ == "__main__":`` guard: before a session starts a LocalCluster in a process
run as ``python script.py``, it marks ``__main__`` as a module that spawned processes must not import again
(its ``__spec__`` named ``__main__``), so Dask's worker processes do not run the script's top level once more.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import datetime as dt
import importlib.machinery
import re
import sys
import threading
from collections.abc import Callable, Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any

from engine.cluster_options import IN_PROCESS
from engine.engine_loop import EngineLoop
from engine.errors import PolisError
from engine.population import spec_folder
from engine.run_progress import Phase, RunPhase, RunProgress
from engine.run_status import RunStatus
from engine.settings import EngineSettings
from engine.society.run.dashboard import experiment_page
from engine.society.run.extend import extend_spec, parse_steps, stored_spec
from engine.society.run.sweep import run_spec
from engine.society.run.target import claim_run_target
from engine.society.shells import open_shell
from engine.spec import BudgetSpec, ExperimentSpec, RunOptions, StepSpec, load_spec, parse_spec
from engine.storage.run_layout import RunLocation, resolve_location, run_name
from polis.progress import ProgressBar
from polis.runs import Run, open_run

__all__ = ["PolisUsageError", "RunFuture", "Session", "SpecLike", "as_spec", "default_session", "plain"]

SpecLike = ExperimentSpec | Mapping[str, Any] | str | Path


class PolisUsageError(PolisError):
    """The API was called in a way that cannot work (e.g. the blocking ``run`` inside a running event loop)."""


class RunFuture:
    """A run going on in a session: its latest progress, a way to cancel it, and its :class:`Run` at the end."""

    def __init__(self, future: concurrent.futures.Future[Run], run_dir: Path | str) -> None:
        self._future = future
        self.run_dir = run_dir  #: where the run writes
        self._progress: RunProgress | None = None

    def progress(self) -> RunProgress | None:
        """The last progress the run reported (ticks, agent-steps, LLM calls, tokens, errors); None before the first."""
        return self._progress

    def done(self) -> bool:
        return self._future.done()

    def cancel(self) -> bool:
        """Ask the run to stop; it ends ``cancelled`` at its next commit point (``polis run --resume`` continues it)."""
        return self._future.cancel()

    def result(self, timeout: float | None = None) -> Run:
        """Wait for the run to end and return it.

        Raises:
            SpecError, PolisError: what the run raised (a refused spec, a cluster that could not start ...).
            concurrent.futures.CancelledError: it was cancelled.
            TimeoutError: not ended within ``timeout`` seconds.
        """
        return self._future.result(timeout)

    def _report(self, progress: RunProgress) -> None:
        self._progress = progress


class Session:
    """One settings tree and one cluster client, reused across runs; close it (or use ``with``) when done.

    Args:
        settings: the settings tree; default: read from the ``POLIS_*`` environment, as the CLI reads it.
        **overrides: settings to change from those (``scheduler="tcp://host:8786"``, ``n_workers=2`` ...).
            ``scheduler="in-process"`` runs everything in this process, with no cluster: it starts at once and
            suits small runs (a few hundred agents) and tests; it has no Dask dashboard.
    """

    def __init__(self, settings: EngineSettings | None = None, **overrides: Any) -> None:
        base = settings if settings is not None else EngineSettings()
        self.settings = base.model_copy(update=overrides) if overrides else base
        self._lock = threading.Lock()
        self._loop: EngineLoop | None = None
        self._shell: Any = None
        self._stack: contextlib.AsyncExitStack | None = None
        self.dashboard_link: str | None = None  #: the cluster's dashboard page for experiments, once connected

    # ---- runs --------------------------------------------------------------------------------------------
    def run(self, spec: SpecLike, run_dir: RunLocation | None = None, *, progress: bool | None = None,
            overwrite: bool = False, **options: Any) -> Run:
        """Run a spec to its end and return the :class:`Run`; blocks (safe in Jupyter).

        Args:
            spec: an :class:`~engine.spec.ExperimentSpec`, a dict of one, or a YAML/JSON file's path.
            run_dir: where the run writes (a directory or a store URL); default ``runs/<name>-<UTC time>``.
            progress: show a progress bar (a widget in Jupyter); default: when interactive.
            overwrite: replace the run or sweep ``run_dir`` holds (without it, that is refused).
            **options: more for the run driver: ``force=True``, ``llm_cache_dir=...``.

        Raises:
            SpecError: the spec is invalid (field paths in the message), before any cluster starts.
            RunExistsError: ``run_dir`` holds a run or a sweep (read it with :meth:`open_run`, continue it with
                :meth:`resume`, or pass ``overwrite=True``), before any cluster starts.
            PolisUsageError: called from a running event loop outside Jupyter: ``await session.arun(...)`` there.
        """
        _refuse_inside_a_loop("run", "arun")
        return self.submit(spec, run_dir, progress=progress, overwrite=overwrite, **options).result()

    async def arun(self, spec: SpecLike, run_dir: RunLocation | None = None, *, progress: bool | None = None,
                   overwrite: bool = False, **options: Any) -> Run:
        """:meth:`run` for async code: await it from any event loop."""
        return await asyncio.wrap_future(self.submit(spec, run_dir, progress=progress, overwrite=overwrite, **options)._future)

    def submit(self, spec: SpecLike, run_dir: RunLocation | None = None, *, progress: bool | None = None,
               overwrite: bool = False, **options: Any) -> RunFuture:
        """Start a run and return at once with its :class:`RunFuture` (the spec and ``run_dir`` are checked first,
        as :meth:`run` says)."""
        if "resume" in options:
            raise PolisUsageError("a new run takes no resume=...: continue a stored run with Session.resume(run)")
        parsed = as_spec(spec)
        location = resolve_location(run_dir) if run_dir is not None else _default_run_dir(parsed.name)
        claim_run_target(location, overwrite=overwrite)

        async def drive(on_progress: Callable[[RunProgress], None]) -> Run:
            summary = await run_spec(parsed, location, self._shell, on_progress=on_progress,
                                     experiment_id=run_name(location), **{**self.settings.run_options(), **options})
            return Run(location, summary, session=self)

        return self._start(drive, location, progress, _totals(parsed))

    def fork(self, parent: Run | RunLocation, at_step: int, run_dir: RunLocation | None = None, *,
             patch: Mapping[str, Any] | None = None, progress: bool | None = None, **options: Any) -> Run:
        """A new run from ``parent``'s state at its committed tick ``at_step``, its spec merge-patched by ``patch``
        (RFC 7386) for what follows; the shared past is not run again (its LLM answers come from the parent's cache).

        Raises:
            SpecError: the patch does not make a valid spec (field paths under ``patch``).
            ForkError: the parent does not keep that tick (``snapshots.keep``), or ``run_dir`` holds something.
        """
        from engine.society.fork.materialize import plan_fork
        from engine.society.fork.run import fork_experiment

        _refuse_inside_a_loop("fork", "arun")
        source = parent.location if isinstance(parent, Run) else resolve_location(parent)
        plan_fork(source, at_step, dict(patch) if patch else None)  # a bad patch or tick is refused before the cluster
        location = resolve_location(run_dir) if run_dir is not None else _default_run_dir(f"{run_name(source)}-fork{at_step}")

        async def drive(on_progress: Callable[[RunProgress], None]) -> Run:
            _, summary = await fork_experiment(source, at_step, location, self._shell, patch=dict(patch) if patch else None,
                                               on_progress=on_progress, experiment_id=run_name(location),
                                               **{**self.settings.run_options(), **options})
            return Run(location, summary, session=self)

        return self._start(drive, location, progress).result()

    def resume(self, run: Run | RunLocation, *, steps: Sequence[StepSpec | Mapping[str, Any]] = (),
               budget: BudgetSpec | Mapping[str, Any] | None = None, run_options: RunOptions | Mapping[str, Any] | None = None,
               progress: bool | None = None, **options: Any) -> Run:
        """Continue a stored run from its last committed transaction, to the end of its spec.

        Args:
            run: the run (a :class:`Run`, its directory or store URL, or a sweep root).
            steps: questionnaire, ask or intervene steps to append first (models or dicts); their answers land
                in the run's own datasets.
            budget: a new budget for what follows (``{"max_calls": 500}``).
            run_options: run options to change (``{"batch_size": 64, "max_workers": 8}``; see :class:`RunOptions`):
                what follows runs with them, and later resumes start from them. What the run simulates stays.
            progress: show a progress bar; default: when interactive.
            **options: more for the run driver (``force=True`` resumes although the spec changed).

        Raises:
            SpecError: the run holds no spec, or the steps or budget are invalid (field paths), before the cluster.
        """
        _refuse_inside_a_loop("resume", "arun")
        location = run.location if isinstance(run, Run) else resolve_location(run)
        spec = stored_spec(location)
        if steps:
            spec = extend_spec(spec, parse_steps([plain(step) for step in steps]))
        if budget is not None or run_options is not None:
            changes = {"budget": plain(budget)} if budget is not None else {}
            spec = parse_spec({**spec.model_dump(mode="json"), **changes, **plain(run_options or {})})

        async def drive(on_progress: Callable[[RunProgress], None]) -> Run:
            summary = await run_spec(spec, location, self._shell, on_progress=on_progress, resume=True,
                                     experiment_id=run_name(location), **{**self.settings.run_options(), **options})
            return Run(location, summary, session=self)

        return self._start(drive, location, progress).result()

    def _start(self, drive: Callable[[Callable[[RunProgress], None]], Coroutine[Any, Any, Run]], location: Path | str,
               progress: bool | None, totals: tuple[int, int] = (0, 0)) -> RunFuture:
        """Drive a run on the session's loop, reporting to its future and, if asked, to a progress bar (which shows
        the cluster starting first, when this run starts one); ``totals``: the run's ticks and agent-steps, if known."""
        bar = ProgressBar(run_name(location)) if (progress if progress is not None else _interactive()) else None
        if bar is not None and self._loop is None and self.settings.scheduler != IN_PROCESS:  # in-process: nothing to start
            bar(RunProgress(RunStatus.STARTING, 0, totals[0], 0, totals[1]).with_phase(Phase(RunPhase.STARTING_CLUSTER)))
        try:
            loop, _ = self._connect()
        except BaseException:
            if bar is not None:
                bar.close()
            raise
        holder: list[RunFuture] = []

        def on_progress(report: RunProgress) -> None:
            if holder:
                holder[0]._report(report)
            if bar is not None:
                bar(report)

        async def driven() -> Run:
            try:
                if bar is not None and self.dashboard_link:
                    bar.note(f"Dask dashboard: {self.dashboard_link}")
                return await drive(on_progress)
            finally:
                if bar is not None:
                    bar.close()

        future = RunFuture(loop.submit(driven()), location)
        holder.append(future)
        return future

    def open_run(self, location: RunLocation) -> Run:
        """Open a stored run (directory, store URL or sweep root) on this session; see :func:`polis.open_run`."""
        return open_run(location, session=self)

    # ---- the cluster ---------------------------------------------------------------------------------------
    @property
    def client(self) -> Any:
        """The session's asynchronous ``distributed.Client`` (connecting now if it is not yet); None in-process."""
        return self._connect()[1].client

    def close(self) -> None:
        """Close the client (and the LocalCluster it started) and stop the loop thread. Idempotent."""
        with self._lock:
            loop, stack = self._loop, self._stack
            self._loop = self._shell = self._stack = None
        if loop is None:
            return
        if stack is not None:
            with contextlib.suppress(Exception):
                loop.submit(stack.aclose()).result(timeout=60)
        loop.stop()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _connect(self) -> tuple[EngineLoop, Any]:
        with self._lock:
            if self._loop is not None:
                return self._loop, self._shell
            if self.settings.scheduler is None:
                _spawned_processes_skip_main()
            loop = EngineLoop(name="polis-session")
            stack = contextlib.AsyncExitStack()

            async def start() -> Any:
                shell = await stack.enter_async_context(open_shell(self.settings.scheduler, **self.settings.cluster_options()))
                self.dashboard_link = await experiment_page(shell.client)
                return shell

            try:
                shell = loop.submit(start()).result()
            except BaseException:
                loop.stop()
                raise
            self._loop, self._shell, self._stack = loop, shell, stack
            return loop, shell



def as_spec(spec: SpecLike) -> ExperimentSpec:
    """An :class:`ExperimentSpec` from a spec, a dict of one, or a YAML/JSON file's path (a population's ``from``
    names a table relative to the file's folder, or to the working directory for a dict).

    Raises:
        SpecError: the spec is invalid, or the file cannot be read (field paths in the message).
    """
    if isinstance(spec, ExperimentSpec):
        return spec
    if isinstance(spec, str | Path):
        return load_spec(spec)
    return parse_spec(dict(spec), locate=spec_folder(Path.cwd()))  # a population's "from" table: relative to here


_DEFAULT: list[Session] = []
_DEFAULT_LOCK = threading.Lock()


def default_session() -> Session:
    """The session :func:`polis.run` and friends use: made at the first call from the ``POLIS_*`` settings, closed at exit."""
    with _DEFAULT_LOCK:
        if not _DEFAULT:
            _DEFAULT.append(Session())
            atexit.register(_DEFAULT[0].close)
        return _DEFAULT[0]


def plain(value: Any) -> Any:
    """A model as the JSON-ready dict a spec holds; anything else as it is."""
    return value.model_dump(mode="json") if hasattr(value, "model_dump") else value


def _totals(spec: ExperimentSpec) -> tuple[int, int]:
    """A run's ticks and agent-steps, before its first report (a sweep's: (0, 0), its cells not expanded yet)."""
    if spec.sweep is not None:
        return 0, 0
    ticks = spec.total_ticks()
    return ticks, ticks * len(spec.all_agents())


def _default_run_dir(name: str) -> Path:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%S%f")
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-.")[:60] or "run"
    return (Path("runs") / f"{slug}-{stamp}").resolve()


def _interactive() -> bool:
    return _in_ipython() or sys.stderr.isatty()


def _in_ipython() -> bool:
    ipython = sys.modules.get("IPython")
    return ipython is not None and getattr(ipython, "get_ipython", lambda: None)() is not None


def _refuse_inside_a_loop(blocking: str, awaitable: str) -> None:
    """A blocking call from a thread whose event loop runs would stall that loop: say what to await instead.
    (A Jupyter cell runs inside the kernel's loop, and blocking it is what a cell does: allowed there.)"""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return
    if not _in_ipython():
        raise PolisUsageError(f"polis.{blocking}() blocks until the run ends, and this thread runs an event loop: "
                              f"use `await polis.{awaitable}(...)` here, or polis.submit(...) for a RunFuture")


def _spawned_processes_skip_main(modules: Mapping[str, Any] = sys.modules) -> None:
    """Keep worker processes from running a script's top level again (see the module docstring)."""
    main = modules.get("__main__")
    if main is not None and getattr(main, "__spec__", None) is None and getattr(main, "__file__", None):
        main.__spec__ = importlib.machinery.ModuleSpec("__main__", None)

