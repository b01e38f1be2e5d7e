"""The engine's error tree. Engine errors know nothing about HTTP.

    PolisError
    ├── SpecError                 a spec that cannot be run (bad field, unknown type)
    │   └── DataFileError         a data file a spec names that cannot be used (row and column)
    │       ├── PopulationFileError  a population's table (``from:``) that cannot be read, or a row that is no profile
    │       └── NetworkFileError     a network layer's edge file, or an edge in it that names no agent
    ├── LLMError                  the LLM layer
    │   ├── LLMCallError          a call failed after its retries (status, body recorded)
    │   │   └── LLMRateLimitError the provider answered 429
    │   ├── StructuredOutputError no schema-valid answer after N tries
    │   └── BudgetExhaustedError  the run's call/token/cost budget is spent
    ├── EnvError                  the environment layer
    │   ├── ToolDefinitionError   a @tool that breaks the tool contract (raised at class definition)
    │   ├── ToolCallError         a tool call with an unknown name or bad arguments
    │   ├── EnvMetricError        a module metric that is undeclared, undescribed or not a finite number
    │   └── EnvUnavailableError   the env actor cannot be reached (its worker died)
    ├── FidelityError             a survey item that cannot be scored (too few answers, no shared options)
    ├── AgentError                the agent runtime
    │   └── WorkspaceError        a workspace that is missing, corrupt or escaped from
    ├── StorageError              replay / trace storage, and the stores that hold them
    │   ├── QueryError            a query the read-only surface refuses or DuckDB rejects
    │   ├── PackCorruptError      a workspace pack that is truncated or fails a checksum
    │   ├── StoreKeyError         a store key that is no relative '/'-path (empty, absolute, '..', backslash, NUL)
    │   ├── StoreKeyNotFoundError a key the store does not hold (names the key and the store)
    │   ├── StoreUrlError         a storage location of an unknown scheme, or whose fsspec package is not installed
    │   ├── StoreUnavailableError a store that fails its preflight probe (no bucket, no credentials, read-only)
    │   ├── NotARunError          a path or URL that holds no run and no sweep (the message says what it holds)
    │   ├── DatasetNotFoundError  no dataset of that name in a run's results (or a name no dataset can have)
    │   ├── AgentNotFoundError    no agent of that id in a run
    │   └── AgentFileNotFoundError no such file in an agent's workspace, or a path that leaves it
    └── RunError                  the society / run lifecycle
        ├── RunLockedError        another live driver holds the run directory's lease
        ├── RunExistsError        a new run into a folder or URL that already holds a run or a sweep
        ├── StaleRunError         a task of a driver session that no longer holds the run
        ├── ForkError             a fork or as-of read whose tick is not kept, whose parent runs, or whose target holds a run
        ├── PreflightError        a worker that cannot do its part (no Polis, no run dir, no LLM), before tick 0
        ├── OverBudgetError       the upper estimate passes a cap of the spec's budget (polis run --force runs anyway)
        ├── TaskStallError        tasks in flight that no worker starts within the bound (no workers, no match)
        └── WorkCancelledError    work a run handed off (its network) stopped at a checkpoint: the run was cancelled
"""

from __future__ import annotations

__all__ = [
    "AgentError",
    "AgentFileNotFoundError",
    "AgentNotFoundError",
    "BudgetExhaustedError",
    "DataFileError",
    "DatasetNotFoundError",
    "EnvError",
    "EnvMetricError",
    "EnvUnavailableError",
    "FidelityError",
    "ForkError",
    "LLMCallError",
    "LLMError",
    "LLMRateLimitError",
    "NetworkFileError",
    "NotARunError",
    "OverBudgetError",
    "PackCorruptError",
    "PolisError",
    "PopulationFileError",
    "PreflightError",
    "QueryError",
    "RunError",
    "RunExistsError",
    "RunLockedError",
    "SpecError",
    "StaleRunError",
    "StorageError",
    "StoreKeyError",
    "StoreKeyNotFoundError",
    "StoreUnavailableError",
    "StoreUrlError",
    "StructuredOutputError",
    "TaskStallError",
    "ToolCallError",
    "ToolDefinitionError",
    "WorkCancelledError",
    "WorkspaceError",
]


class PolisError(Exception):
    """Base of every error the engine raises on purpose."""


class SpecError(PolisError):
    """A spec that cannot be run.

    Args:
        message: what is wrong.
        path: the field path, e.g. ``agents.3.type``.
    """

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path


class DataFileError(SpecError):
    """A data file a spec names that cannot be used, and where in it.

    Args:
        message: what is wrong.
        path: the field path, e.g. ``population.0.from``.
        row: the 1-based data row (the header is not a row; in JSONL, the line), when one row is at fault.
        column: the column at fault, when one is.
    """

    def __init__(self, message: str, path: str = "", *, row: int | None = None, column: str | None = None) -> None:
        super().__init__(message, path)
        self.row = row
        self.column = column


class PopulationFileError(DataFileError):
    """A population's table (``population.N.from``) that cannot make agents.

    The file is missing, has an unknown extension, does not parse, lacks a listed column, or has a
    value that cannot be a profile field.
    """


class NetworkFileError(DataFileError):
    """A network layer's edge file (``network.layers.<name>.from``) that cannot be read, or an edge it cannot hold:
    an id that is no agent's, a self-loop, a repeated edge, a weight that is not a finite number."""


class LLMError(PolisError):
    """The LLM layer."""


class LLMCallError(LLMError):
    """A call that failed after its retries."""

    def __init__(self, message: str, *, status: int | None = None, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class LLMRateLimitError(LLMCallError):
    """The provider answered 429."""


class StructuredOutputError(LLMError):
    """No schema-valid answer after the allowed tries; the last raw text is kept."""

    def __init__(self, message: str, *, attempts: int, last_text: str | None) -> None:
        super().__init__(message)
        self.attempts = attempts
        self.last_text = last_text


class BudgetExhaustedError(LLMError):
    """The budget allows no further provider call; the run stops cleanly between agent-steps."""


class EnvError(PolisError):
    """The environment layer."""


class ToolDefinitionError(EnvError):
    """A @tool method that breaks the tool contract."""


class ToolCallError(EnvError):
    """A tool call with an unknown name or bad arguments."""


class EnvMetricError(EnvError):
    """A module's summary metric that breaks the metric contract: a value under an undeclared name, a value
    that is not a finite number, or a declaration without a description. The message names the module and metric."""


class EnvUnavailableError(EnvError):
    """The env actor cannot be reached: the worker holding it died. The tick is re-run on a new actor."""


class FidelityError(PolisError):
    """A run's answers that cannot be scored against the survey: the message names the item and why."""


class AgentError(PolisError):
    """The agent runtime."""


class WorkspaceError(AgentError):
    """A workspace that is missing, corrupt, or a path that escapes it."""


class StorageError(PolisError):
    """Replay or trace storage, and the stores that hold them."""


class QueryError(StorageError):
    """A query refused by the read-only surface or rejected by DuckDB."""


class PackCorruptError(StorageError):
    """A workspace pack that is truncated or fails a checksum (the message names it)."""


class StoreKeyError(StorageError):
    """A store key that is not a relative '/'-separated path: empty, absolute, with an empty, '.' or '..' segment,
    a backslash or a NUL, or a segment named like a store's temp file (``.<name>.tmp-<hex>``)."""


class StoreKeyNotFoundError(StorageError):
    """A key the store does not hold.

    Args:
        key: the missing key.
        url: the store's location, as :attr:`engine.storage.store.Store.url` gives it.
    """

    def __init__(self, key: str, url: str) -> None:
        super().__init__(f"no key {key!r} in store {url}")
        self.key = key
        self.url = url

    def __reduce__(self) -> tuple[type[StoreKeyNotFoundError], tuple[str, str]]:
        # Rebuilt from its fields, not from the message: Dask pickles errors raised on workers.
        return type(self), (self.key, self.url)


class StoreUrlError(StorageError):
    """A storage location that names an unknown scheme, or one whose fsspec implementation is not installed."""


class StoreUnavailableError(StorageError):
    """A store that fails its preflight probe (write, read back, delete): the message names the store and the cause."""


class NotARunError(StorageError):
    """A path or store URL that holds neither a run nor a sweep (the message says what it found there)."""


class DatasetNotFoundError(StorageError):
    """No dataset of this name in a run's results.

    Args:
        run: the run's id or name, as the caller knows it.
        name: the dataset asked for.
        reason: why, when it is more than "not there" (e.g. a name no dataset can have).
    """

    def __init__(self, run: str, name: str, reason: str | None = None) -> None:
        message = f"run {run!r} has no dataset {name!r}"
        super().__init__(f"{message}: {reason}" if reason else message)
        self.run, self.name, self.reason = run, name, reason

    def __reduce__(self) -> tuple[type[DatasetNotFoundError], tuple[str, str, str | None]]:
        return type(self), (self.run, self.name, self.reason)


class AgentNotFoundError(StorageError):
    """No agent with this id in a run.

    Args:
        run: the run's id or name.
        agent_id: the agent asked for.
    """

    def __init__(self, run: str, agent_id: int) -> None:
        super().__init__(f"run {run!r} has no agent {agent_id}")
        self.run, self.agent_id = run, agent_id

    def __reduce__(self) -> tuple[type[AgentNotFoundError], tuple[str, int]]:
        return type(self), (self.run, self.agent_id)


class AgentFileNotFoundError(StorageError):
    """No such file in an agent's workspace, or a path that is not one.

    Args:
        run: the run's id or name.
        agent_id: the agent.
        path: the path asked for.
    """

    def __init__(self, run: str, agent_id: int, path: str) -> None:
        super().__init__(f"agent {agent_id} of run {run!r} has no file {path!r}")
        self.run, self.agent_id, self.path = run, agent_id, path

    def __reduce__(self) -> tuple[type[AgentFileNotFoundError], tuple[str, int, str]]:
        return type(self), (self.run, self.agent_id, self.path)


class RunError(PolisError):
    """The society and run lifecycle."""


class RunLockedError(RunError):
    """Another driver, still alive by its lease, is running this run directory."""


class RunExistsError(RunError):
    """A new run into a folder or URL that already holds a run or a sweep (refused before any cluster starts):
    read it with ``polis.open_run``, continue it with ``polis.resume``, or replace it with ``overwrite=True``."""


class StaleRunError(RunError):
    """A task of a driver session that no longer holds the run (it was cancelled and resumed since)."""


class ForkError(RunError):
    """A fork or an as-of read that cannot be made: the tick is not kept, the parent is running, the target holds a run."""


class PreflightError(RunError):
    """The cluster cannot run this run: a worker lacks Polis, the run directory or an LLM endpoint.

    Args:
        message: every problem found, one per line.
        workers: the addresses of the workers named in ``message``.
    """

    def __init__(self, message: str, *, workers: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.workers = workers


class OverBudgetError(RunError):
    """The upper end of the spec's estimate passes a cap of its budget: the run does not start."""


class TaskStallError(RunError):
    """Tasks in flight that no worker started within the bound: the cluster has no workers, or none can run them."""


class WorkCancelledError(RunError):
    """Work a run handed off (:meth:`~engine.society.shells.base.Shell.offload`) stopped at one of its checkpoints,
    because the run was cancelled or the task was released meanwhile."""
