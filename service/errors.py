"""The service's error tree, and the one place where errors become HTTP status codes.

    ServiceError                      the control plane
    ├── ExperimentNotFoundError       no experiment with that id            → 404
    ├── DatasetNotFoundError          no dataset with that name in the run  → 404
    └── ExperimentNotRunningError     cancel asked of a finished experiment → 409

Engine errors (``engine.errors``) know nothing about HTTP; :func:`status_code_for` maps them:
``SpecError`` → 422, ``QueryError`` → 400, any other ``PolisError`` → 500.
"""

from __future__ import annotations

from engine.errors import PolisError, QueryError, SpecError

__all__ = [
    "DatasetNotFoundError",
    "ExperimentNotFoundError",
    "ExperimentNotRunningError",
    "ServiceError",
    "status_code_for",
]


class ServiceError(Exception):
    """Base of every error the service raises on purpose."""


class ExperimentNotFoundError(ServiceError):
    """No experiment with this id.

    Args:
        experiment_id: the id that was asked for.
    """

    def __init__(self, experiment_id: str) -> None:
        super().__init__(f"experiment {experiment_id!r} not found")
        self.experiment_id = experiment_id


class DatasetNotFoundError(ServiceError):
    """No dataset with this name in an experiment's results.

    Args:
        experiment_id: the experiment whose results were searched.
        name: the dataset name that was asked for.
        reason: why, when it is more than "not there" (e.g. an invalid name).
    """

    def __init__(self, experiment_id: str, name: str, reason: str | None = None) -> None:
        message = f"experiment {experiment_id!r} has no dataset {name!r}"
        super().__init__(f"{message}: {reason}" if reason else message)
        self.experiment_id = experiment_id
        self.name = name


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


# Most specific first: the first isinstance match wins.
_STATUS_CODES: tuple[tuple[type[Exception], int], ...] = (
    (ExperimentNotFoundError, 404),
    (DatasetNotFoundError, 404),
    (ExperimentNotRunningError, 409),
    (SpecError, 422),
    (QueryError, 400),
    (ServiceError, 500),
    (PolisError, 500),
)


def status_code_for(error: BaseException) -> int:
    """The HTTP status code for an engine or service error.

    Args:
        error: any exception; ones outside both trees are server errors.

    Returns:
        404 for an unknown experiment or dataset, 409 for cancelling a finished experiment,
        422 for a ``SpecError``, 400 for a ``QueryError``, 500 otherwise.
    """
    for error_type, code in _STATUS_CODES:
        if isinstance(error, error_type):
            return code
    return 500
