"""``PolisClient``: the Polis REST service from Python, on httpx (synchronous).

    from service.client import PolisClient

    with PolisClient("http://127.0.0.1:8400", token="polis_...") as polis:
        experiment = polis.submit("spec.yaml")        # an ExperimentAccepted
        detail = polis.wait(experiment.id)            # a progress line on stderr from the event stream
        print(detail.status, detail.usage)
        actions = polis.dataset(experiment.id, "actions").to_pandas()

Bodies come back as the service's own response models (``service.schemas``: ``ExperimentAccepted``,
``ExperimentDetail``, ``DatasetInfo``, ``AgentMemory``, ``SqlResult`` ...), datasets and Arrow query results
as ``pyarrow.Table``. Error responses raise the classes of ``service.client_errors``. Importing the client
loads httpx, pydantic and the engine's value modules (statuses, progress, the spec, the result models): not
FastAPI, not Dask, not DuckDB (``tests/test_layers.py`` checks it); pyarrow when a table is asked for.
"""

from __future__ import annotations

import builtins
import io
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Literal, TypeVar, overload
from urllib.parse import quote

import httpx

from engine.run_status import ENDED_STATUSES, RunStatus
from service.client_errors import ConnectionFailedError, NotFoundError, WaitTimeoutError, error_for_status
from service.client_events import EventStreamParser, ServerSentEvent, progress_line
from service.schemas import (
    AgentFiles,
    AgentMemory,
    DatasetInfo,
    DatasetList,
    ExperimentAccepted,
    ExperimentBrief,
    ExperimentDetail,
    ExperimentList,
    FidelityResult,
    RegressionFidelity,
    RegressionSpec,
    SqlResult,
)

if TYPE_CHECKING:
    import pyarrow as pa
    from pydantic import BaseModel

__all__ = ["ARROW_STREAM", "FINAL_STATUSES", "PARQUET", "PolisClient"]

#: Media types of the binary results.
ARROW_STREAM = "application/vnd.apache.arrow.stream"
PARQUET = "application/vnd.apache.parquet"
#: Statuses after which an experiment changes no more (the service's ``ENDED_STATUSES``).
FINAL_STATUSES: frozenset[str] = frozenset(ENDED_STATUSES | {RunStatus.INTERRUPTED})

_YAML_SUFFIXES = (".yaml", ".yml")
_RECONNECTS = 5  # consecutive failed re-opens of an event stream before giving up
_POLL_S = 0.5

_Model = TypeVar("_Model", bound="BaseModel")


class PolisClient:
    """A client of one Polis service.

    Args:
        base_url: the service, e.g. ``http://127.0.0.1:8400``.
        token: the bearer token (``polis token create``); None for a service without a token file.
        timeout: seconds for connecting and for each ordinary request.
        stream_timeout: seconds an event stream may stay silent before it is re-opened.
        transport: an httpx transport to use instead of the network (e.g. ``httpx.MockTransport``).
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        timeout: float = 30.0,
        *,
        stream_timeout: float = 60.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(base_url=base_url, headers=headers, timeout=timeout, transport=transport)
        self._timeout = timeout
        self._stream_timeout = stream_timeout

    def __enter__(self) -> PolisClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    # -- experiments ---------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """The service's URL."""
        return str(self._http.base_url).rstrip("/")

    def submit(self, spec: Any, *, idempotency_key: str | None = None) -> ExperimentAccepted:
        """Submit an experiment.

        Args:
            spec: a spec as a dict, an ``ExperimentSpec``, or the path of a JSON or YAML file
                (a ``.yaml``/``.yml`` file is sent as ``application/yaml``, as written).
            idempotency_key: sent as ``Idempotency-Key``: a retry with it returns the experiment the first made.

        Returns:
            The new experiment: its id, status (``queued``) and links, not its spec.

        Raises:
            SpecRejectedError: the spec is invalid or over a quota (``errors`` names the fields).
            SpecTooLargeError: the body is over the service's size limit.
        """
        key = {"Idempotency-Key": idempotency_key} if idempotency_key is not None else {}
        if isinstance(spec, str | Path):
            path = Path(spec)
            media = "application/yaml" if path.suffix.lower() in _YAML_SUFFIXES else "application/json"
            return self._model(ExperimentAccepted, "POST", "/experiments", content=path.read_bytes(),
                               headers={"Content-Type": media, **key})
        if hasattr(spec, "model_dump"):
            spec = spec.model_dump(mode="json")
        return self._model(ExperimentAccepted, "POST", "/experiments", json=spec, headers=key)

    def get(self, experiment_id: str) -> ExperimentDetail:
        """One experiment's detail: status, progress, usage, spec.

        Raises:
            NotFoundError: no such experiment that this token may see.
        """
        return self._model(ExperimentDetail, "GET", f"/experiments/{experiment_id}")

    def list(self) -> builtins.list[ExperimentBrief]:
        """The experiments this token may see, newest first (without their specs)."""

        return self._model(ExperimentList, "GET", "/experiments").experiments

    def cancel(self, experiment_id: str) -> ExperimentAccepted:
        """Ask a queued or running experiment to stop; it ends ``cancelled``.

        Returns:
            The experiment as the request left it (it may still be ``running`` until its tick ends).

        Raises:
            ConflictError: it has already finished.
        """
        return self._model(ExperimentAccepted, "POST", f"/experiments/{experiment_id}/cancel")

    def resume(self, experiment_id: str, budget: dict[str, Any] | None = None, *, batch_size: int | None = None,
               max_workers: int | None = None) -> ExperimentAccepted:
        """Queue a stopped experiment again, from its last committed tick.

        Args:
            experiment_id: a cancelled, interrupted or budget-exhausted experiment.
            budget: a raised budget (the spec's ``BudgetSpec`` fields), or None to keep it.
            batch_size: agents per batch future from now on (None: unchanged).
            max_workers: batch futures running at once from now on (None: unchanged).

        Returns:
            The experiment, queued again.

        Raises:
            ConflictError: it is queued or running.
        """
        given = {"budget": budget, "batch_size": batch_size, "max_workers": max_workers}
        body = {key: value for key, value in given.items() if value is not None} or None
        return self._model(ExperimentAccepted, "POST", f"/experiments/{experiment_id}/resume", json=body)

    def steps(self, experiment_id: str, steps: builtins.list[dict[str, Any]]) -> ExperimentAccepted:
        """Run questionnaire, ask or intervene steps on a finished run; their answers land in its datasets.

        Returns:
            The experiment, queued again to run the steps.

        Raises:
            ConflictError: it is queued or running.
            SpecRejectedError: a step is invalid.
        """
        return self._model(ExperimentAccepted, "POST", f"/experiments/{experiment_id}/steps", json={"steps": steps})

    def fork(self, experiment_id: str, at_step: int, patch: dict[str, Any] | None = None,
             name: str | None = None) -> ExperimentAccepted:
        """Start a new experiment from a finished one's state at its committed tick ``at_step``.

        Args:
            experiment_id: the parent, a finished run.
            at_step: the parent's committed tick the fork starts from.
            patch: a JSON merge patch over the parent's spec (its future: steps after ``at_step``,
                module kwargs, LLM settings, budget); None keeps the spec.
            name: the new experiment's name (default: the parent's, with ``(fork at K)``).

        Returns:
            The new experiment (``forked_from`` names the parent), queued.

        Raises:
            ConflictError: the parent is queued or running.
            SpecRejectedError: ``at_step`` is past the parent's ticks or not kept, or the patch makes no valid fork.
        """
        body: dict[str, Any] = {"at_step": at_step, "patch": patch}
        if name is not None:
            body["name"] = name
        return self._model(ExperimentAccepted, "POST", f"/experiments/{experiment_id}/fork", json=body)

    def delete(self, experiment_id: str) -> None:
        """Remove an experiment's record and data.

        Raises:
            ConflictError: it is queued or running.
        """
        self._request("DELETE", f"/experiments/{experiment_id}")

    # -- watching ------------------------------------------------------------------------------

    def events(self, experiment_id: str, last_event_id: str | None = None) -> Iterator[ServerSentEvent]:
        """The experiment's event stream, re-opened with ``Last-Event-ID`` when it drops, until its ``final`` event.

        Args:
            experiment_id: the experiment.
            last_event_id: resume after this event id instead of from the start.

        Yields:
            Each event once, ``status``, ``phase``, ``tick`` and finally ``final``.

        Raises:
            NotFoundError: no such experiment (or the service has no event stream).
            ConnectionFailedError: the stream dropped and could not be re-opened.
        """
        return self._stream(experiment_id, last_event_id, deadline=None)

    def wait(
        self, experiment_id: str, progress: bool = True, timeout: float | None = None, *, file: IO[str] | None = None
    ) -> ExperimentDetail:
        """Wait for an experiment to reach a final status, following its event stream.

        Args:
            experiment_id: the experiment.
            progress: write a progress line (``phase`` and ``tick`` events) to ``file``.
            timeout: seconds to wait at most; None waits as long as it runs.
            file: where the progress goes; stderr when None.

        Returns:
            The experiment's detail once it is final.

        Raises:
            WaitTimeoutError: it was still not final after ``timeout`` seconds.
            NotFoundError: no such experiment.
        """
        out = file if file is not None else sys.stderr
        deadline = None if timeout is None else time.monotonic() + timeout
        shown = False
        try:
            for event in self._events_or_polls(experiment_id, deadline):
                if not progress or event.event not in {"tick", "phase", "status"}:
                    continue
                data = event.json()
                # A status change without counters would reset the bar to zero: only ticks, phases and polled details move it.
                if event.event in {"tick", "phase"} or "progress" in data:
                    out.write("\r" + progress_line(data))
                    out.flush()
                    shown = True
        finally:
            if shown:
                out.write("\n")
        return self.get(experiment_id)

    # -- results -------------------------------------------------------------------------------

    def datasets(self, experiment_id: str) -> builtins.list[DatasetInfo]:
        """The run's datasets: name, kind, description, committed rows, columns (empty before the run catalogued any)."""

        return self._model(DatasetList, "GET", f"/experiments/{experiment_id}/datasets").datasets

    def dataset(self, experiment_id: str, name: str) -> pa.Table:
        """Every committed row of one dataset, as a ``pyarrow.Table`` (``.to_pandas()`` needs pandas).

        Raises:
            NotFoundError: no such experiment, or no such dataset in it.
        """
        import pyarrow.parquet as pq

        response = self._request("GET", f"/experiments/{experiment_id}/datasets/{name}.parquet")
        return pq.read_table(io.BytesIO(response.content))

    def fidelity(self, experiment_id: str, *, by: Sequence[str] = (), questionnaire_id: str | None = None,
                 bootstrap: int = 200, seed: int = 0, retest: Mapping[str, float] | None = None,
                 regression: RegressionSpec | Mapping[str, Any] | None = None) -> FidelityResult:
        """Score a survey experiment's simulated answers against the real ones (also written as its ``fidelity`` dataset);
        with a ``regression`` (``{"formula": "y ~ a + b", "family": "ols"}``), also fit it on both and compare the
        coefficients (``FidelityResult.regression``).

        Raises:
            NotFoundError: no such experiment.
            SpecRejectedError: the run has no survey, asked none of its items, or an item cannot be scored (422).
        """
        body = {"by": list(by), "questionnaire_id": questionnaire_id, "bootstrap": bootstrap, "seed": seed,
                "retest": dict(retest or {})}
        if regression is not None:
            body["regression"] = (regression.model_dump() if isinstance(regression, RegressionSpec)
                                  else dict(regression))
        return self._model(FidelityResult, "POST", f"/experiments/{experiment_id}/fidelity", json=body)

    def regression(self, experiment_id: str, formula: str, *, family: str = "ols",
                   questionnaire_id: str | None = None) -> RegressionFidelity:
        """Fit ``formula`` on a survey experiment's real and simulated answers and compare the coefficients (written as
        its ``regression_fidelity`` dataset; its fidelity figures are left as they are).

        Raises:
            NotFoundError: no such experiment.
            SpecRejectedError: the formula cannot be fitted, or the run has no survey (422).
        """
        body = {"regression": {"formula": formula, "family": family}, "questionnaire_id": questionnaire_id}
        return self._model(RegressionFidelity, "POST", f"/experiments/{experiment_id}/regression", json=body)

    @overload
    def sql(self, experiment_id: str, query: str, format: Literal["json"] = "json", max_rows: int | None = None) -> SqlResult: ...

    @overload
    def sql(self, experiment_id: str, query: str, format: Literal["arrow", "parquet"], max_rows: int | None = None) -> pa.Table: ...

    def sql(
        self,
        experiment_id: str,
        query: str,
        format: Literal["json", "arrow", "parquet"] = "json",
        max_rows: int | None = None,
    ) -> SqlResult | pa.Table:
        """Run a read-only SQL query on the run's datasets.

        Args:
            experiment_id: the experiment.
            query: one ``SELECT`` statement.
            format: ``json`` returns a ``service.schemas.SqlResult`` (``columns``, ``rows``, ``truncated``);
                ``arrow`` and ``parquet`` return a ``pyarrow.Table`` (sent as Arrow IPC or Parquet).
            max_rows: fewer rows than the service's limit.

        Raises:
            QueryRefusedError: the service refuses the query (the message says why).
        """
        body: dict[str, Any] = {"sql": query}
        if max_rows is not None:
            body["max_rows"] = max_rows
        path = f"/experiments/{experiment_id}/sql"
        if format == "json":

            return self._model(SqlResult, "POST", path, json=body)
        media = {"arrow": ARROW_STREAM, "parquet": PARQUET}[format]
        response = self._request("POST", path, json=body, headers={"Accept": media})
        if format == "arrow":
            import pyarrow.ipc

            return pyarrow.ipc.open_stream(response.content).read_all()
        import pyarrow.parquet as pq

        return pq.read_table(io.BytesIO(response.content))

    def agent(self, experiment_id: str, agent_id: int, step: int | None = None) -> AgentMemory:
        """One agent: its type, profile and config, and its memory, TODO list and episodes as of a step.

        Args:
            experiment_id: the experiment.
            agent_id: the agent's id in the spec.
            step: the society step; None for the agent's last committed one.

        Raises:
            NotFoundError: no such experiment, or no such agent in it.
            SpecRejectedError: ``step`` is negative.
        """
        return self._model(AgentMemory, "GET", f"/experiments/{experiment_id}/agents/{agent_id}", params=_step(step))

    def agent_files(self, experiment_id: str, agent_id: int, step: int | None = None) -> AgentFiles:
        """Every file of an agent's workspace with its size.

        Args:
            experiment_id: the experiment.
            agent_id: the agent's id.
            step: a kept tick; None for the workspace as the run stands.

        Raises:
            NotFoundError: no such experiment or agent.
            SpecRejectedError: ``step`` is after the run's ticks.
            ConflictError: the run no longer keeps that tick.
        """
        return self._model(AgentFiles, "GET", f"/experiments/{experiment_id}/agents/{agent_id}/files", params=_step(step))

    def agent_file(self, experiment_id: str, agent_id: int, path: str, step: int | None = None) -> bytes:
        """One file of an agent's workspace, as bytes (``AGENT.json``, ``memory/episodes.jsonl`` ...).

        Args:
            experiment_id: the experiment.
            agent_id: the agent's id.
            path: the file's path in the workspace, as :meth:`agent_files` lists it.
            step: a kept tick; None for the workspace as the run stands.

        Raises:
            NotFoundError: no such experiment, agent or file (or a path that leaves the workspace).
        """
        url = f"/experiments/{experiment_id}/agents/{agent_id}/files/{quote(path, safe='/')}"
        return self._request("GET", url, params=_step(step)).content

    def report_data(self, experiment_id: str) -> dict[str, Any]:
        """What the results page shows, as the service answers it.

        Returns:
            ``{"report": ..., "signature": ...}``: ``report`` is the page's data (title, summary, errors,
            panels with their lines, datasets, cells, extra), ``signature`` its layout.

        Raises:
            NotFoundError: no such experiment.
        """
        data: dict[str, Any] = self._request("GET", f"/experiments/{experiment_id}/report/data").json()
        return data

    def report_page(self, experiment_id: str) -> str:
        """The results page as the service serves it (HTML that loads BokehJS, data and SQL from the service).

        For one file that opens without the service, use ``polis.RemoteRun.report``.

        Raises:
            NotFoundError: no such experiment.
        """
        return self._request("GET", f"/experiments/{experiment_id}/report").text

    # -- plumbing ------------------------------------------------------------------------------

    def _stream(self, experiment_id: str, last_event_id: str | None, deadline: float | None) -> Iterator[ServerSentEvent]:
        parser = EventStreamParser(last_event_id)
        failures = 0
        while True:
            headers = {"Accept": "text/event-stream"}
            if parser.last_event_id is not None:
                headers["Last-Event-ID"] = parser.last_event_id
            read_s = self._stream_timeout
            if deadline is not None:
                read_s = max(0.1, min(read_s, deadline - time.monotonic()))
            received = ended = False
            try:
                with self._http.stream("GET", f"/experiments/{experiment_id}/events", headers=headers,
                                       timeout=httpx.Timeout(self._timeout, read=read_s)) as response:
                    if response.is_error:
                        response.read()
                        raise _error(response)
                    for line in response.iter_lines():
                        event = parser.feed(line)
                        if event is not None:
                            received = True
                            # An experiment that ran again (resume, steps) replays its earlier final
                            # events: only a final the service then closes the stream on is the end.
                            ended = event.event == "final"
                            yield event
                            _check(deadline, experiment_id)
            except httpx.TransportError as error:
                dropped: str = f"dropped ({type(error).__name__}: {error})"
            else:
                if ended:
                    return
                dropped = "ended before its final event"
            # Re-open the stream where it stopped. A connection that brought no event counts as a
            # failure, so a dead stream cannot spin.
            _check(deadline, experiment_id)
            failures = 0 if received else failures + 1
            if failures > _RECONNECTS:
                raise ConnectionFailedError(f"the event stream of {experiment_id} {dropped}, {failures} times with no event")
            time.sleep((parser.retry_ms or 500) / 1000 if failures else 0)

    def _events_or_polls(self, experiment_id: str, deadline: float | None) -> Iterator[ServerSentEvent]:
        try:
            yield from self._stream(experiment_id, None, deadline)
            return
        except NotFoundError:
            self.get(experiment_id)  # raises NotFoundError when the experiment itself is missing
        # The service has no event stream: poll the detail, reporting each change as a status event.
        last = None
        while True:
            detail = self.get(experiment_id)
            if detail != last:
                yield ServerSentEvent("status", detail.model_dump_json(), None)
                last = detail
            if detail.status in FINAL_STATUSES:
                return
            _check(deadline, experiment_id)
            time.sleep(_POLL_S)

    def _model(self, model: type[_Model], method: str, path: str, **kwargs: Any) -> _Model:
        """The answer's JSON body, validated as the route's response model."""
        return model.model_validate_json(self._request(method, path, **kwargs).content)

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as error:
            raise ConnectionFailedError(f"{method} {self._http.base_url}{path}: {error}") from error
        if response.is_error:
            raise _error(response)
        return response


def _error(response: httpx.Response) -> Exception:
    try:
        detail = response.json().get("detail", response.text)
    except (ValueError, AttributeError):
        detail = response.text
    return error_for_status(response.status_code, detail)


def _step(step: int | None) -> dict[str, int]:
    return {} if step is None else {"step": step}


def _check(deadline: float | None, experiment_id: str) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise WaitTimeoutError(f"experiment {experiment_id} is not final yet")
