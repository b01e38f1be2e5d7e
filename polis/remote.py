"""The same runs against a `polis serve`: ``polis.connect(url, token)`` gives a session whose runs read over HTTP.

A :class:`RemoteRun` reads as a local :class:`~polis.Run` does (``status``, ``summary()``, ``datasets()``,
``table()``, ``df()``, ``sql()``, ``duckdb()``), through the service's routes: datasets come down as Parquet,
queries as Arrow, and the experiment's record as the service's typed model (:attr:`RemoteRun.detail`).
Errors are the typed ones of ``service.client_errors`` (401 :class:`UnauthorizedError`, 404, 422 with field
paths ...); a token never appears in their messages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.run_status import RunStatus
from polis.session import SpecLike, as_spec
from service.client import PolisClient
from service.schemas import ExperimentDetail

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
        return ExperimentDetail.model_validate(self._client.get(self.id))

    @property
    def status(self) -> RunStatus:
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
        return sorted(item["name"] for item in self._client.datasets(self.id))

    def table(self, name: str) -> pa.Table:
        """Every committed row of one dataset (downloaded as Parquet)."""
        table: pa.Table = self._client.dataset(self.id, name)
        return table

    def df(self, name: str) -> pd.DataFrame:
        return self.table(name).to_pandas()

    def sql(self, query: str) -> pa.Table:
        """A read-only query, run by the service (its row and time limits apply), as Arrow."""
        table: pa.Table = self._client.sql(self.id, query, format="arrow")
        return table

    def duckdb(self, con: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
        """A DuckDB connection of yours holding each dataset as a table (downloaded now), to join your own data."""
        import duckdb

        con = con if con is not None else duckdb.connect()
        for name in self.datasets():
            con.register("_polis_download", self.table(name))
            con.execute(f'CREATE OR REPLACE TABLE "{name}" AS SELECT * FROM _polis_download')
            con.unregister("_polis_download")
        return con

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
        return RemoteRun(self.client, self.client.submit(parsed, idempotency_key=idempotency_key)["id"])

    def run(self, spec: SpecLike, *, progress: bool | None = None, timeout: float | None = None) -> RemoteRun:
        """Submit a spec and wait for it to end (a progress line from its event stream when ``progress``)."""
        submitted = self.submit(spec)
        self.client.wait(submitted.id, progress=bool(progress), timeout=timeout)
        return submitted

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
