"""The one mapping from engine and service errors to HTTP status codes."""

from __future__ import annotations

import pytest

from engine.errors import (
    DatasetNotFoundError,
    ForkError,
    LLMCallError,
    PolisError,
    QueryError,
    RunError,
    RunLockedError,
    SpecError,
    StorageError,
)
from service.errors import (
    ExperimentNotFoundError,
    ExperimentNotRunningError,
    ServiceError,
    status_code_for,
)


@pytest.mark.parametrize(
    ("error", "code"),
    [
        (SpecError("must be >= 1", path="batch_size"), 422),
        (QueryError("only SELECT statements are allowed"), 400),
        (ExperimentNotFoundError("abc123"), 404),
        (DatasetNotFoundError("abc123", "nope"), 404),
        (ExperimentNotRunningError("abc123", "completed"), 409),
        (StorageError("disk full"), 500),
        (RunError("worker lost"), 500),
        (ForkError("tick 1 is not kept; raise snapshots.keep"), 409),
        (RunLockedError("held"), 500),
        (LLMCallError("boom", status=502), 500),
        (PolisError("anything else"), 500),
        (ServiceError("anything else"), 500),
        (ValueError("not ours"), 500),
    ],
)
def test_status_code_for_maps_engine_and_service_errors(error: Exception, code: int) -> None:
    assert status_code_for(error) == code


def test_not_found_messages_name_what_was_missing() -> None:
    assert "abc123" in str(ExperimentNotFoundError("abc123"))
    message = str(DatasetNotFoundError("abc123", "bad-name", "not a valid dataset name"))
    assert "bad-name" in message and "abc123" in message and "not a valid dataset name" in message


def test_service_errors_are_not_engine_errors() -> None:
    assert not issubclass(ServiceError, PolisError)
