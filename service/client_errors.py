"""The Python client's error tree: one class per status the service answers (``service.errors`` on the other side).

    PolisClientError                   anything the client cannot do
    ├── ConnectionFailedError          the service cannot be reached, or a stream cannot be re-opened
    ├── WaitTimeoutError               ``wait()`` ran out of time (also a ``TimeoutError``)
    └── ResponseError                  the service answered an error (``status_code``, ``detail``)
        ├── QueryRefusedError          400  a SQL query refused, with the reason
        ├── UnauthorizedError          401  no token, or an unknown one
        ├── NotFoundError              404  no such experiment or dataset (or another owner's)
        ├── NotAcceptableError         406  no representation for the asked format
        ├── ConflictError              409  the experiment's status does not allow it
        ├── SpecTooLargeError          413  the body is over the size limit
        ├── UnsupportedMediaTypeError  415  the body is neither JSON nor YAML
        ├── SpecRejectedError          422  invalid, over a quota, or a credential not granted (``errors``)
        └── ServerError                5xx  the service failed

This module imports nothing beyond the standard library, so the client stays cheap to import.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ConflictError",
    "ConnectionFailedError",
    "NotAcceptableError",
    "NotFoundError",
    "PolisClientError",
    "QueryRefusedError",
    "ResponseError",
    "ServerError",
    "SpecRejectedError",
    "SpecTooLargeError",
    "UnauthorizedError",
    "UnsupportedMediaTypeError",
    "WaitTimeoutError",
    "error_for_status",
]


class PolisClientError(Exception):
    """Base of every error the Polis client raises."""


class ConnectionFailedError(PolisClientError):
    """The service could not be reached (refused, reset, timed out)."""


class WaitTimeoutError(PolisClientError, TimeoutError):
    """An experiment did not reach a final status within the time given to ``wait()``."""


class ResponseError(PolisClientError):
    """The service answered with an error status.

    Args:
        status_code: the HTTP status.
        detail: the body's ``detail``: a sentence, or (422) a list of ``{"type", "loc", "msg"}`` items.
    """

    def __init__(self, status_code: int, detail: Any) -> None:
        super().__init__(f"{status_code}: {_describe(detail)}")
        self.status_code = status_code
        self.detail = detail


class QueryRefusedError(ResponseError):
    """400: a SQL query the service refuses to run (the message says why)."""


class UnauthorizedError(ResponseError):
    """401: the client sent no token, or one the service does not know."""


class NotFoundError(ResponseError):
    """404: no such experiment or dataset that this token may see."""


class NotAcceptableError(ResponseError):
    """406: the service has no representation in the asked format."""


class ConflictError(ResponseError):
    """409: the experiment's status does not allow the request (e.g. delete a running one)."""


class SpecTooLargeError(ResponseError):
    """413: the request body is over the service's size limit."""


class UnsupportedMediaTypeError(ResponseError):
    """415: the body is in a format the service does not read."""


class SpecRejectedError(ResponseError):
    """422: the spec or body is invalid, over a quota, or names a credential not granted.

    ``errors`` holds one ``{"type", "loc", "msg"}`` item per problem; ``loc`` is the field path.
    """

    @property
    def errors(self) -> list[dict[str, Any]]:
        """Each problem as an item with ``type``, ``loc`` and ``msg`` (one item if the service sent a sentence)."""
        if isinstance(self.detail, list):
            return [item for item in self.detail if isinstance(item, dict)]
        return [{"type": "rejected", "loc": ["body"], "msg": str(self.detail)}]


class ServerError(ResponseError):
    """5xx: the service failed to answer."""


_BY_STATUS: dict[int, type[ResponseError]] = {
    400: QueryRefusedError,
    401: UnauthorizedError,
    404: NotFoundError,
    406: NotAcceptableError,
    409: ConflictError,
    413: SpecTooLargeError,
    415: UnsupportedMediaTypeError,
    422: SpecRejectedError,
}


def error_for_status(status_code: int, detail: Any) -> ResponseError:
    """The client error for an error response.

    Args:
        status_code: the HTTP status, 400 or more.
        detail: the body's ``detail`` (or the body's text when it is not JSON).

    Returns:
        The matching class from the tree; ``ServerError`` for 5xx, ``ResponseError`` for other codes.
    """
    if status_code >= 500:
        return ServerError(status_code, detail)
    return _BY_STATUS.get(status_code, ResponseError)(status_code, detail)


def _describe(detail: Any) -> str:
    if isinstance(detail, list):
        parts = []
        for item in detail:
            if isinstance(item, dict):
                where = ".".join(str(p) for p in item.get("loc", []) if p != "body")
                parts.append(f"{where}: {item.get('msg')}" if where else str(item.get("msg")))
            else:
                parts.append(str(item))
        return "; ".join(parts)
    return str(detail)
