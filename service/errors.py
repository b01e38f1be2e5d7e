"""The service's error tree, and the one place where errors become HTTP status codes.

    ServiceError                          the control plane                                  → 500
    ├── AuthConfigError                   the token or grants file is unreadable (startup)   → 500
    ├── UnauthorizedError                 no bearer token, or an unknown one                 → 401
    ├── ExperimentNotFoundError           no experiment with that id (or another owner's)    → 404
    ├── ExperimentNotRunningError         cancel asked of a finished experiment              → 409
    ├── ExperimentBusyError               delete, resume, steps or fork of a live experiment → 409
    ├── IdempotencyConflictError          an Idempotency-Key reused with another body        → 409
    ├── SpecTooLargeError                 a request body over the size limit                 → 413
    ├── UnsupportedMediaTypeError         a body that is neither JSON nor YAML               → 415
    ├── NotAcceptableError                an ``Accept`` the endpoint cannot answer           → 406
    ├── TooManyRequestsError              an owner's share of SQL queries, scorings or event streams in use → 429
    │   └── DailyQuotaExceededError       the owner's LLM calls for today (UTC) are used up
    ├── TimeLimitError                    a scoring past its time limit, stopped             → 422
    ├── WorkCancelledError                a computation cancelled: its request gone, the service stopping → 503
    └── SpecRejectedError                 a spec refused by the service's rules (``path``)   → 422
        ├── QuotaExceededError            over one of the owner's quotas
        └── CredentialNotGrantedError     a key variable or endpoint not granted to the owner

Engine errors (``engine.errors``) know nothing about HTTP; :func:`status_code_for` maps them:
``DatasetNotFoundError``, ``AgentNotFoundError`` and ``AgentFileNotFoundError`` (what the read side raises) → 404,
``SpecError`` and ``FidelityError`` (an item that cannot be scored) → 422, ``QueryError`` → 400, ``ForkError`` (e.g. an ``as_of_step`` on a tick the stored run no
longer keeps) → 409, any other ``PolisError`` → 500. ``POST /experiments/{id}/fork`` refuses a tick its parent
no longer keeps before any experiment is made, as a ``SpecRejectedError`` at ``at_step`` (422): there the tick
is the request's own field.
"""

from __future__ import annotations

from engine.errors import (
    AgentFileNotFoundError,
    AgentNotFoundError,
    DatasetNotFoundError,
    FidelityError,
    ForkError,
    PolisError,
    QueryError,
    SpecError,
)

__all__ = [
    "AuthConfigError",
    "CredentialNotGrantedError",
    "DailyQuotaExceededError",
    "ExperimentBusyError",
    "ExperimentNotFoundError",
    "ExperimentNotRunningError",
    "IdempotencyConflictError",
    "NotAcceptableError",
    "QuotaExceededError",
    "ServiceError",
    "SpecRejectedError",
    "SpecTooLargeError",
    "TimeLimitError",
    "TooManyRequestsError",
    "UnauthorizedError",
    "UnsupportedMediaTypeError",
    "WorkCancelledError",
    "status_code_for",
]


class ServiceError(Exception):
    """Base of every error the service raises on purpose."""


class AuthConfigError(ServiceError):
    """The token file or the grants file cannot be used, or the service would serve anyone as admin."""


class UnauthorizedError(ServiceError):
    """The request carries no valid bearer token."""


class ExperimentNotFoundError(ServiceError):
    """No experiment with this id that the caller may see.

    Args:
        experiment_id: the id that was asked for.
    """

    def __init__(self, experiment_id: str) -> None:
        super().__init__(f"experiment {experiment_id!r} not found")
        self.experiment_id = experiment_id


class ExperimentNotRunningError(ServiceError):
    """A request that needs a queued or running experiment found a finished one.

    Args:
        experiment_id: the experiment.
        status: its current status.
    """

    def __init__(self, experiment_id: str, status: str) -> None:
        super().__init__(f"experiment {experiment_id!r} is {status}, not running")
        self.experiment_id = experiment_id
        self.status = status


class ExperimentBusyError(ServiceError):
    """A request that needs a finished experiment found one queued or running.

    Args:
        experiment_id: the experiment.
        status: its current status.
        action: what was asked, e.g. ``"delete"``.
    """

    def __init__(self, experiment_id: str, status: str, action: str) -> None:
        super().__init__(f"cannot {action} experiment {experiment_id!r}: it is {status}; cancel it first")
        self.experiment_id = experiment_id
        self.status = status


class IdempotencyConflictError(ServiceError):
    """An ``Idempotency-Key`` the caller already used for another request body."""


class SpecTooLargeError(ServiceError):
    """A request body larger than the service accepts."""


class TooManyRequestsError(ServiceError):
    """All of what one owner (or everyone) may hold at once is in use: concurrent SQL queries, open event streams.

    Args:
        message: which limit, and what is in use.
        retry_after_s: when trying again may succeed (the ``Retry-After`` header).
    """

    def __init__(self, message: str, retry_after_s: int = 1) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class DailyQuotaExceededError(TooManyRequestsError):
    """An owner whose LLM calls today would pass ``max_llm_calls_per_day``; it resets at 00:00 UTC."""


class TimeLimitError(ServiceError):
    """A service-side computation that ran past its time limit and was stopped (the message names the setting)."""


class WorkCancelledError(ServiceError):
    """A service-side computation stopped before it finished: its request went away, or the service is stopping."""


class UnsupportedMediaTypeError(ServiceError):
    """A request body in a format the endpoint does not read."""


class NotAcceptableError(ServiceError):
    """An ``Accept`` header the endpoint has no representation for."""


class SpecRejectedError(ServiceError):
    """A valid spec the service will not run for this caller.

    Args:
        message: what is wrong, naming the limit.
        path: the field path, e.g. ``population.0.count``.
    """

    def __init__(self, message: str, path: str = "") -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path


class QuotaExceededError(SpecRejectedError):
    """A spec over one of its owner's quotas (agents, agent-steps, disk)."""


class CredentialNotGrantedError(SpecRejectedError):
    """A spec naming a key variable or an endpoint its owner has not been granted."""


# Most specific first: the first isinstance match wins.
_STATUS_CODES: tuple[tuple[type[Exception], int], ...] = (
    (UnauthorizedError, 401),
    (ExperimentNotFoundError, 404),
    (DatasetNotFoundError, 404),
    (AgentNotFoundError, 404),
    (AgentFileNotFoundError, 404),
    (NotAcceptableError, 406),
    (ExperimentNotRunningError, 409),
    (ExperimentBusyError, 409),
    (IdempotencyConflictError, 409),
    (SpecTooLargeError, 413),
    (UnsupportedMediaTypeError, 415),
    (TooManyRequestsError, 429),
    (TimeLimitError, 422),
    (WorkCancelledError, 503),
    (SpecRejectedError, 422),
    (SpecError, 422),
    (FidelityError, 422),
    (QueryError, 400),
    (ForkError, 409),
    (ServiceError, 500),
    (PolisError, 500),
)


def status_code_for(error: BaseException) -> int:
    """The HTTP status code for an engine or service error.

    Args:
        error: any exception; ones outside both trees are server errors.

    Returns:
        The code from the table in this module's docstring; 500 for anything else.
    """
    for error_type, code in _STATUS_CODES:
        if isinstance(error, error_type):
            return code
    return 500
