"""A run, as a researcher reads it: status, datasets as Arrow or pandas, SQL, and the views in their own DuckDB."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from engine.errors import DatasetNotFoundError, RunError, StorageError
from engine.results.agents import read_agent
from engine.results.report import ReportData, load_report
from engine.run_status import RunStatus
from engine.society.lease import effective_status
from engine.society.run.extend import stored_spec
from engine.society.run.target import require_run
from engine.society.status import read_society_step
from engine.spec import AskStep, BudgetSpec, QuestionSpec, RunOptions, StepSpec
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import RunLocation, resolve_location, run_name
from engine.storage.sweep_layout import read_sweep_manifest

if TYPE_CHECKING:
    import duckdb
    import pandas as pd
    import pyarrow as pa

    from engine.results import AgentMemory
    from engine.society.run.runner import RunSummary

__all__ = ["Question", "Run", "SessionLike", "answer_of", "answers_query", "interview_step", "open_run", "write_page"]


class SessionLike(Protocol):
    """What a :class:`Run` continues on (a :class:`polis.Session`): its :meth:`Run.fork` and :meth:`Run.resume`, and so
    :meth:`Run.ask` and :meth:`Run.interview`, which resume it with one more step."""

    def fork(self, parent: Run, at_step: int, run_dir: RunLocation | None = None, *,
             patch: Mapping[str, Any] | None = None, progress: bool | None = None, **options: Any) -> Run: ...

    def resume(self, run: Run, *, steps: Sequence[StepSpec | Mapping[str, Any]] = (),
               budget: BudgetSpec | Mapping[str, Any] | None = None, run_options: RunOptions | Mapping[str, Any] | None = None,
               progress: bool | None = None, **options: Any) -> Run: ...


class Run:
    """One run directory, store URL or sweep root, read on demand.

    Made by :func:`polis.run` (with the summary its driver reported) or :func:`open_run` (any stored run).
    Reads go through one :class:`~engine.storage.reader.ReplayReader`, opened at the first read and kept.

    Args:
        location: the run directory, its store URL (``s3://bucket/prefix/name``) or a sweep root.
        summary: what the run's driver reported when it ended, if this process drove it.
        session: the session that ran or opened it, which :meth:`fork`, :meth:`resume`, :meth:`ask` and
            :meth:`interview` run on (:func:`polis.open_run` gives the default session).
    """

    def __init__(self, location: RunLocation, summary: RunSummary | None = None, *, session: SessionLike) -> None:
        self.location: Path | str = resolve_location(location)  #: the directory (absolute) or URL
        self._summary = summary
        self._session = session
        self._reader: ReplayReader | None = None
        self._lock = threading.Lock()

    @property
    def id(self) -> str:
        """The run's name: its directory's (or URL's) last part."""
        return run_name(self.location)

    @property
    def is_sweep(self) -> bool:
        """Whether this is a sweep root (its datasets then have one row set per cell, with ``cell`` and ``param_*``)."""
        return isinstance(self.location, Path) and read_sweep_manifest(self.location) is not None

    @property
    def status(self) -> RunStatus:
        """The run's status as stored now (a run whose driver died without writing its end reads ``interrupted``).

        A sweep's is the worst of its cells' (``failed`` over ``completed_with_errors`` over ``completed``).
        """
        if self.is_sweep:
            return self._sweep_status()
        status = effective_status(self.location)
        if status is None:
            raise StorageError(f"{self.location} holds no run (no SOCIETY_STEP.json)")
        return status

    def summary(self) -> dict[str, Any]:
        """Status, ticks and transactions as stored, and the driver's usage figures when this process ran it."""
        stored = read_society_step(self.location) if not self.is_sweep else None
        out: dict[str, Any] = {"id": self.id, "location": str(self.location), "status": str(self.status)}
        if stored is not None:
            out.update(ticks=stored.step_count, transactions=stored.txn, simulated_time=stored.current_time.isoformat(),
                       error=stored.error)
        if self._summary is not None:
            s = self._summary
            out.update(agent_steps=s.agent_steps, llm_calls=s.llm_calls, input_tokens=s.input_tokens,
                       output_tokens=s.output_tokens, duration_s=round(s.duration_s, 3), errors=s.errors,
                       first_error=s.first_error)
        return out

    def datasets(self) -> list[str]:
        """The names of the run's datasets (``actions``, ``llm_calls``, ``questionnaire_answers`` ... and ``spans``)."""
        return self._read().datasets()

    def table(self, name: str) -> pa.Table:
        """One dataset, whole, as an Arrow table (``SELECT * FROM name``; no row limit)."""
        reader = self._read()
        if name not in reader.datasets():
            raise DatasetNotFoundError(self.id, name, f"it has {', '.join(reader.datasets()) or 'none yet'}")
        return reader.query(f'SELECT * FROM "{name}"')

    def df(self, name: str) -> pd.DataFrame:
        """One dataset as a pandas DataFrame."""
        return self.table(name).to_pandas()

    def sql(self, query: str, params: list[Any] | dict[str, Any] | None = None) -> pa.Table:
        """A read-only query over the run's views, as Arrow (``.to_pandas()`` for pandas). For joins with your own
        data, use :meth:`duckdb`."""
        return self._read().query(query, params)

    def duckdb(self, con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection of yours with the run's datasets as views: query them beside your own tables.

        Args:
            con: the connection to add them to (default: a new in-memory one). Nothing of its settings changes.
        """
        import duckdb

        con = con if con is not None else duckdb.connect()
        self._read().register_views(con)
        return con

    def agent(self, agent_id: int, step: int | None = None) -> AgentMemory:
        """One agent: its type, profile and config, and its memory, TODO list and episodes as of ``step`` (default:
        its last committed step).

        Raises:
            AgentNotFoundError: the run has no such agent.
        """
        return read_agent(self.id, self.location, agent_id, step)

    def fidelity(self, *, by: Sequence[str] = (), questionnaire_id: str | None = None, bootstrap: int = 200, seed: int = 0,
                 retest: Mapping[str, float] | None = None) -> pd.DataFrame:
        """Score a survey run's simulated answers against its respondents' real ones, one row per item, metric and
        subgroup, with bootstrap intervals (see :mod:`engine.fidelity`); also written as the run's ``fidelity`` dataset.

        Args:
            by: persona fields to report subgroups of (with each one's gap to the whole sample).
            questionnaire_id: score this questionnaire (default: each item's last).
            bootstrap: resamples behind each interval.
            retest: item -> people's test-retest accuracy on it, for ``item_normalized_accuracy``.

        Raises:
            FidelityError: the run has no survey, asked none of its items, or an item cannot be scored.
        """
        import pandas as pd

        from engine.fidelity import fidelity

        report = fidelity(self.location, by=by, questionnaire_id=questionnaire_id, bootstrap=bootstrap, seed=seed,
                          retest=retest)
        self.close()  # the next read sees the fidelity dataset
        return pd.DataFrame(report.rows())

    def regression_fidelity(self, formula: str, *, family: str = "ols", questionnaire_id: str | None = None) -> pd.DataFrame:
        """Fit a regression on a survey run's real answers and on its simulated ones, one row per coefficient side by
        side (see :mod:`engine.fidelity.regression`); also written as the run's ``regression_fidelity`` dataset.

        Args:
            formula: ``target ~ field + field``, over the survey's persona fields and target items; ``C(field)``
                makes a field categorical (one dummy per value but the first).
            family: ``ols`` (weighted least squares on the target's scale step) or ``logit`` (a binary target).
            questionnaire_id: the simulated answers of this questionnaire (default: each item's last).

        Returns:
            The coefficients; ``frame.attrs`` holds ``n``, ``share_differ`` (the slopes that differ significantly)
            and ``share_sign_flipped``.

        Raises:
            SpecError: a column that is neither a persona field nor a target, a collinear design, fewer than 10
                respondents per coefficient (at ``regression.formula``), or a logit of a non-binary target.
            FidelityError: the run has no survey or asked none of its items, or a logit cannot be fitted.
        """
        import pandas as pd

        from engine.fidelity import regression_fidelity, regression_spec

        report = regression_fidelity(self.location, regression_spec(formula, family), questionnaire_id=questionnaire_id)
        self.close()  # the next read sees the regression_fidelity dataset
        frame = pd.DataFrame(report.rows())
        frame.attrs.update(n=report.n, share_differ=report.share_differ, share_sign_flipped=report.share_sign_flipped)
        return frame

    def report(self, path: str | Path = "report.html") -> Path:
        """Write the run's results page as one standalone HTML file (summary, errors, plots and the datasets' columns; the
        SQL box and live updates are the service's page only: use :meth:`sql` here); return its path."""
        return write_page(load_report(self.location), path)

    def fork(self, at_step: int, run_dir: RunLocation | None = None, *, patch: dict[str, Any] | None = None,
             progress: bool | None = None, **options: Any) -> Run:
        """A new run from this one's state at its committed tick ``at_step``; see :meth:`polis.Session.fork`."""
        return self._session.fork(self, at_step, run_dir, patch=patch, progress=progress, **options)

    def resume(self, *, steps: Sequence[StepSpec | Mapping[str, Any]] = (), budget: BudgetSpec | Mapping[str, Any] | None = None,
               run_options: RunOptions | Mapping[str, Any] | None = None, progress: bool | None = None, **options: Any) -> Run:
        """Continue this run from its last committed transaction (after a cancel, a crash or a spent budget),
        optionally with steps appended, a new budget or other run options; see :meth:`polis.Session.resume`."""
        self.close()
        return self._session.resume(self, steps=steps, budget=budget, run_options=run_options, progress=progress, **options)

    def ask(self, question: str, *, as_of_step: int | None = None, progress: bool | None = None) -> str:
        """Ask the society a question (the plan-and-execute helper reads the env and may interview agents);
        the answer is also kept as a ``society_queries`` row. Nothing else of the run changes.

        Args:
            question: the question.
            as_of_step: answer as the society was at this kept tick (``snapshots.keep``).

        Raises:
            RunError: the helper found no answer (its error is the message); the row says ``failed``.
        """
        index = self._append(AskStep(question=question, as_of_step=as_of_step), progress)
        return answer_of(self, index)

    def interview(self, questions: Question | Sequence[Question], *,
                  agents: Sequence[int] | None = None, as_of_step: int | None = None, questionnaire_id: str | None = None,
                  progress: bool | None = None) -> pd.DataFrame:
        """Put questions to the agents (all, or ``agents``) as a questionnaire; each answers in character, read-only.

        Args:
            questions: one question, or several: texts (free-text answers, ids ``q1``, ``q2`` ...), or
                questions with a ``response_type`` and ``choices`` (:class:`polis.QuestionSpec` or dicts).
            agents: the agents to ask (default: every agent).
            as_of_step: answer as the agents were at this kept tick (``snapshots.keep``).
            questionnaire_id: the id its rows carry (default ``interview-<step index>``).

        Returns:
            This step's rows of ``questionnaire_answers``: one per agent and question, with ``parse_success`` and
            ``error`` for answers that did not parse (they are kept, never replaced).
        """
        index = len(stored_spec(self.location).steps)
        self._append(interview_step(questions, index, agents, as_of_step, questionnaire_id), progress)
        return self.sql(answers_query(index)).to_pandas()

    def _append(self, step: StepSpec | Mapping[str, Any], progress: bool | None) -> int:
        """Run one more step on this stored run; return its index in the run's spec."""
        index = len(stored_spec(self.location).steps)
        self.resume(steps=[step], progress=progress)
        return index

    def close(self) -> None:
        """Close the reader (a later read opens it again)."""
        with self._lock:
            if self._reader is not None:
                self._reader.close()
                self._reader = None

    def __repr__(self) -> str:
        try:
            status = str(self.status)
        except StorageError:
            status = "no run"
        return f"<Run {self.id} {status} at {self.location}>"

    def _read(self) -> ReplayReader:
        with self._lock:
            if self._reader is None:
                self._reader = ReplayReader(self.location)
            return self._reader

    def _sweep_status(self) -> RunStatus:
        assert isinstance(self.location, Path)
        manifest = read_sweep_manifest(self.location)
        assert manifest is not None
        order = [RunStatus.FAILED, RunStatus.CRASHED, RunStatus.INTERRUPTED, RunStatus.CANCELLED, RunStatus.BUDGET_EXHAUSTED,
                 RunStatus.COMPLETED_WITH_ERRORS, RunStatus.RUNNING, RunStatus.PENDING, RunStatus.COMPLETED]
        seen = {effective_status(manifest.cell_dir(cell.index)) or RunStatus.PENDING for cell in manifest.cells}
        return next((status for status in order if status in seen), RunStatus.COMPLETED)


#: A question as :meth:`Run.interview` takes it: a text, or a question with its type and choices.
Question = str | QuestionSpec | Mapping[str, Any]


def interview_step(questions: Question | Sequence[Question], index: int, agents: Sequence[int] | None,
                   as_of_step: int | None, questionnaire_id: str | None) -> dict[str, Any]:
    """The questionnaire step an interview appends as the run's step ``index`` (texts become ``q1``, ``q2`` ...)."""
    texts = [questions] if isinstance(questions, str | QuestionSpec | Mapping) else list(questions)
    asked = [{"id": f"q{n}", "prompt": q} if isinstance(q, str) else q for n, q in enumerate(texts, 1)]
    asked = [q.model_dump(mode="json") if isinstance(q, QuestionSpec) else dict(q) for q in asked]
    return {"type": "questionnaire", "questionnaire_id": questionnaire_id or f"interview-{index}", "questions": asked,
            "target_agent_ids": list(agents) if agents is not None else None, "as_of_step": as_of_step}


def write_page(data: ReportData, path: str | Path) -> Path:
    """Write the results page of ``data`` as one standalone HTML file (BokehJS inline); return its path."""
    from service.report.page import standalone_page  # Bokeh and Jinja: only when a page is asked for

    out = Path(path)
    out.write_text(standalone_page(data), encoding="utf-8")
    return out


def answers_query(index: int) -> str:
    """The rows of ``questionnaire_answers`` that step ``index`` wrote."""
    return f"SELECT * FROM questionnaire_answers WHERE step_index = {int(index)} ORDER BY agent_id, question_id"


def answer_of(run: Any, index: int) -> str:
    """The answer of the ask step ``index`` of ``run`` (a :class:`Run` or a remote one: anything with ``sql``).

    Raises:
        RunError: the step failed (its recorded error is the message) or left no row.
    """
    rows = run.sql(f"SELECT status, answer, error FROM society_queries WHERE step_index = {int(index)}").to_pylist()
    if not rows:
        raise RunError(f"the ask step {index} of {run.id} left no answer (status {run.status})")
    if rows[0]["status"] != "ok":
        raise RunError(f"the ask step {index} of {run.id} failed: {rows[0]['error']}")
    return str(rows[0]["answer"])


def open_run(location: RunLocation, *, session: SessionLike) -> Run:
    """Open a stored run on ``session``: a run directory, a store URL or a sweep root (:func:`polis.open_run`).

    Raises:
        NotARunError: ``location`` holds no run and no sweep; the message says what it found there.
    """
    return Run(require_run(resolve_location(location)), session=session)

