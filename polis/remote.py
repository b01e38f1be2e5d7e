"""The same runs against a `polis serve`: ``polis.connect(url, token)`` gives a session whose runs read over HTTP.

A :class:`RemoteRun` reads as a local :class:`~polis.Run` does (``status``, ``summary()``, ``datasets()``,
``table()``, ``df()``, ``sql()``, ``duckdb()``, ``agent()``, ``report()``, ``fork()``), through the service's
routes: datasets come down as Parquet, queries as Arrow, an agent and the experiment's record as the service's
typed models (:class:`~service.schemas.AgentMemory`, :attr:`RemoteRun.detail`), and the results page as its
data, drawn here into one standalone file. It also has what only a service run has: ``wait()`` and ``resume()``.
Errors are the typed ones of ``service.client_errors`` (401 :class:`UnauthorizedError`, 404, 409, 422 with
field paths ...); a token never appears in their messages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.results.report import ReportData
from engine.run_status import RunStatus
from engine.spec import BudgetSpec, StepSpec
from polis.runs import Question, answer_of, answers_query, interview_step, write_page
from polis.session import PolisUsageError, SpecLike, as_spec, plain
from service.client import PolisClient
from service.schemas import AgentMemory, ExperimentDetail

if TYPE_CHECKING:
    import duckdb
    import pandas as pd
    import pyarrow as pa

__all__ = ["RemoteRun", "RemoteSession", "connect"]


class RemoteRun:
    """One experiment of a Polis service, read over HTTP.

    Args:
        client: the session's client.
        experiment_id: the experiment's id.
    """

    def __init__(self, client: PolisClient, experiment_id: str) -> None:
        self._client = client
        self.id = experiment_id  #: the experiment's id on the service

    @property
    def detail(self) -> ExperimentDetail:
        """The experiment as the service holds it now: status, progress, usage, its spec."""
        return self._client.get(self.id)

    @property
    def status(self) -> RunStatus:
        """The experiment's status on the service now (``queued`` and ``running`` before it ends)."""
        return RunStatus(self.detail.status)

    def summary(self) -> dict[str, Any]:
        """The keys :meth:`polis.Run.summary` has, as far as the service reports them."""
        detail = self.detail
        out: dict[str, Any] = {"id": self.id, "location": f"{self._client.base_url}/experiments/{self.id}",
                               "status": str(detail.status), "ticks": detail.progress.ticks_done, "error": detail.error,
                               "agent_steps": detail.progress.agent_steps_done}
        if detail.usage is not None:
            out.update(llm_calls=detail.usage.llm_calls, input_tokens=detail.usage.input_tokens,
                       output_tokens=detail.usage.output_tokens, duration_s=detail.usage.duration_s)
        return out

    def datasets(self) -> list[str]:
        """The names of the run's datasets, as :meth:`polis.Run.datasets` lists them."""
        return sorted(item.name for item in self._client.datasets(self.id))

    def table(self, name: str) -> pa.Table:
        """Every committed row of one dataset (downloaded as Parquet)."""
        table: pa.Table = self._client.dataset(self.id, name)
        return table

    def df(self, name: str) -> pd.DataFrame:
        """One dataset as a pandas DataFrame."""
        return self.table(name).to_pandas()

    def fidelity(self, *, by: Sequence[str] = (), questionnaire_id: str | None = None, bootstrap: int = 200, seed: int = 0,
                 retest: Mapping[str, float] | None = None) -> pd.DataFrame:
        """The figures :meth:`polis.Run.fidelity` gives, scored by the service."""
        import pandas as pd

        result = self._client.fidelity(self.id, by=by, questionnaire_id=questionnaire_id, bootstrap=bootstrap, seed=seed,
                                       retest=retest)
        return pd.DataFrame([figure.model_dump() for figure in result.figures])

    def regression_fidelity(self, formula: str, *, family: str = "ols", questionnaire_id: str | None = None) -> pd.DataFrame:
        """What :meth:`polis.Run.regression_fidelity` gives, fitted by the service: a row per coefficient, with
        ``n``, ``share_differ`` and ``share_sign_flipped`` in ``frame.attrs``."""
        import pandas as pd

        fitted = self._client.regression(self.id, formula, family=family, questionnaire_id=questionnaire_id)
        frame = pd.DataFrame([{"formula": fitted.formula, "family": fitted.family, "n": fitted.n, **c.model_dump()}
                              for c in fitted.coefficients])
        frame.attrs.update(n=fitted.n, share_differ=fitted.share_differ, share_sign_flipped=fitted.share_sign_flipped)
        return frame

    def sql(self, query: str) -> pa.Table:
        """A read-only query, run by the service (its row and time limits apply), as Arrow."""
        return self._client.sql(self.id, query, format="arrow")

    def duckdb(self, con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection of yours holding each dataset as a table (downloaded now), to join your own data."""
        import duckdb

        con = con if con is not None else duckdb.connect()
        for name in self.datasets():
            con.register("_polis_download", self.table(name))
            con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM _polis_download')
            con.unregister("_polis_download")
        return con

    def agent(self, agent_id: int, step: int | None = None) -> AgentMemory:
        """One agent: its type, profile and config, and its memory, TODO list and episodes as of ``step`` (default:
        its last committed step); the model :meth:`polis.Run.agent` returns.

        Raises:
            NotFoundError: the run has no such agent.
        """
        return self._client.agent(self.id, agent_id, step)

    def report(self, path: str | Path = "report.html") -> Path:
        """Write the run's results page (plots, summary) as one standalone HTML file, as :meth:`polis.Run.report`
        does; return its path. The service sends the page's data; the page is drawn here, BokehJS inline."""
        return write_page(ReportData.from_json(self._client.report_data(self.id)["report"]), path)

    def wait(self, timeout: float | None = None, progress: bool = False) -> RemoteRun:
        """Wait until the experiment is final (completed, failed, cancelled ...); return this run.

        Args:
            timeout: seconds to wait at most; None waits as long as it runs.
            progress: draw ``polis run``'s progress line on stderr, from the event stream.

        Raises:
            WaitTimeoutError: it was still not final after ``timeout`` seconds.
        """
        self._client.wait(self.id, progress=progress, timeout=timeout)
        return self

    def fork(self, at_step: int, *, patch: dict[str, Any] | None = None, name: str | None = None,
             progress: bool | None = None, timeout: float | None = None) -> RemoteRun:
        """A new experiment on the service from this one's state at its committed tick ``at_step``, its spec
        merge-patched by ``patch`` (RFC 7386) for what follows; waits for it to end, as :meth:`polis.Run.fork` does.

        Args:
            at_step: this run's committed tick the fork starts from (0: before its first).
            patch: a JSON merge patch over the spec (steps after ``at_step``, module kwargs, LLM settings, budget).
            name: the fork's name (default: this one's, with ``(fork at K)``).
            progress: draw a progress line on stderr while it runs.
            timeout: seconds to wait at most for it to end.

        Returns:
            The fork (``detail.forked_from`` names this run and ``at_step``).

        Raises:
            SpecRejectedError: ``at_step`` is past this run's ticks or not kept, or the patch makes no valid fork
                (field paths under ``patch``).
            ConflictError: this run is queued or running.
        """
        accepted = self._client.fork(self.id, at_step, patch=patch, name=name)
        return RemoteRun(self._client, accepted.id).wait(timeout, progress=bool(progress))

    def resume(self, *, steps: Sequence[StepSpec | Mapping[str, Any]] = (), budget: BudgetSpec | Mapping[str, Any] | None = None,
               progress: bool | None = None, timeout: float | None = None) -> RemoteRun:
        """Run a stopped experiment on from its last committed tick, or run ``steps`` appended to a finished one;
        wait for it to end and return this run (as :meth:`polis.Run.resume`).

        Args:
            steps: questionnaire, ask or intervene steps to append (``POST .../steps``); their answers land in the
                run's own datasets.
            budget: a new budget (``{"max_calls": 500}``; raise it to go on after ``budget_exhausted``), or None to
                keep the spec's. Not with ``steps``: the service takes them in separate requests.
            progress: draw a progress line on stderr while it runs.
            timeout: seconds to wait at most for it to end.

        Raises:
            PolisUsageError: both ``steps`` and ``budget``.
            ConflictError: it is queued or running.
            SpecRejectedError: a step or the budget is invalid (field paths).
        """
        if steps and budget is not None:
            raise PolisUsageError("give steps or a budget to a remote resume, not both: resume with the budget first")
        if steps:
            self._client.steps(self.id, [plain(step) for step in steps])
        else:
            self._client.resume(self.id, plain(budget) if budget is not None else None)
        return self.wait(timeout, progress=bool(progress))

    def ask(self, question: str, *, as_of_step: int | None = None, progress: bool | None = None) -> str:
        """Ask the society a question, as :meth:`polis.Run.ask` does, on the service.

        Raises:
            RunError: the helper found no answer (its recorded error is the message).
        """
        index = len(self.detail.spec["steps"])
        self.resume(steps=[{"type": "ask", "question": question, "as_of_step": as_of_step}], progress=progress)
        return answer_of(self, index)

    def interview(self, questions: Question | Sequence[Question], *, agents: Sequence[int] | None = None,
                  as_of_step: int | None = None, questionnaire_id: str | None = None,
                  progress: bool | None = None) -> pd.DataFrame:
        """Put questions to the agents as a questionnaire, as :meth:`polis.Run.interview` does, on the service."""
        index = len(self.detail.spec["steps"])
        self.resume(steps=[interview_step(questions, index, agents, as_of_step, questionnaire_id)], progress=progress)
        return self.sql(answers_query(index)).to_pandas()

    def __repr__(self) -> str:
        return f"<RemoteRun {self.id} at {self._client.base_url}>"


class RemoteSession:
    """Runs on a Polis service (``polis serve``), with the local session's ``run``/``submit``/``open_run``.

    Args:
        url: the service, e.g. ``http://127.0.0.1:8400``.
        token: a bearer token (``polis token create``); None for a service without a token file.
        timeout: seconds for each ordinary request.
    """

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 30.0) -> None:
        self.client = PolisClient(url, token=token, timeout=timeout)  #: the REST client underneath

    def submit(self, spec: SpecLike, *, idempotency_key: str | None = None) -> RemoteRun:
        """Submit a spec (validated here first: a bad one raises ``SpecError`` with field paths and sends nothing)."""
        parsed = as_spec(spec)
        return RemoteRun(self.client, self.client.submit(parsed, idempotency_key=idempotency_key).id)

    def run(self, spec: SpecLike, *, progress: bool | None = None, timeout: float | None = None) -> RemoteRun:
        """Submit a spec and wait for it to end (a progress line from its event stream when ``progress``)."""
        return self.submit(spec).wait(timeout, progress=bool(progress))

    def open_run(self, experiment_id: str) -> RemoteRun:
        """An experiment of this service by id (404 as ``NotFoundError`` if the token may not see it)."""
        self.client.get(experiment_id)
        return RemoteRun(self.client, experiment_id)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> RemoteSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(url: str, token: str | None = None, *, timeout: float = 30.0) -> RemoteSession:
    """A session on the Polis service at ``url``; see :class:`RemoteSession`."""
    return RemoteSession(url, token, timeout=timeout)

