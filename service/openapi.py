"""Every error code each route can answer, declared in the OpenAPI document with an example body.

:data:`ROUTE_ERRORS` is the table: ``"METHOD path"`` → the codes that route can answer besides its
success (the codes and their causes are the tree in ``service.errors``). An operation that lists 401
takes a ``Caller`` and is also marked with the bearer security scheme. A new route needs a new entry.
:func:`declare_errors` hooks the table into an app's ``openapi()``; :func:`add_error_responses` is
the document transformation itself, plain dicts in and out.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from pydantic import BaseModel, ConfigDict

__all__ = ["ROUTE_ERRORS", "ErrorBody", "ErrorItem", "add_error_responses", "declare_errors", "error_example"]


class ErrorItem(BaseModel):
    """One problem with a request (FastAPI's validation errors and spec errors share this shape)."""

    model_config = ConfigDict(extra="allow")

    type: str  #: a machine-readable kind, e.g. ``missing`` or ``spec_error``
    loc: list[str | int]  #: where: ``["body", ...field path]``, ``["query", name]``, ...
    msg: str  #: what is wrong, for a human


class ErrorBody(BaseModel):
    """The body of every error response."""

    #: A sentence, or (422) one item per problem.
    detail: str | list[ErrorItem]


#: Codes each route can answer besides its success (401: it needs a bearer token). ``/health``,
#: ``/metrics`` and the docs answer no error of their own.
ROUTE_ERRORS: dict[str, tuple[int, ...]] = {
    "POST /experiments": (401, 409, 413, 415, 422, 429),
    "GET /experiments": (401,),
    "GET /cluster": (401,),
    "GET /experiments/{experiment_id}": (401, 404),
    "POST /experiments/{experiment_id}/cancel": (401, 404, 409, 413),
    "POST /experiments/{experiment_id}/resume": (401, 404, 409, 413, 415, 422, 429),
    "DELETE /experiments/{experiment_id}": (401, 404, 409),
    "GET /experiments/{experiment_id}/events": (401, 404, 406, 429),
    "POST /experiments/{experiment_id}/steps": (401, 404, 409, 413, 415, 422, 429),
    "POST /experiments/{experiment_id}/fork": (401, 404, 409, 413, 422, 429),
    "POST /experiments/{experiment_id}/sql": (400, 401, 404, 406, 413, 415, 422, 429),
    "GET /experiments/{experiment_id}/datasets": (401, 404),
    "GET /experiments/{experiment_id}/datasets/{name}.parquet": (401, 404),
    "POST /experiments/{experiment_id}/fidelity": (401, 404, 413, 422, 429),
    "POST /experiments/{experiment_id}/regression": (401, 404, 413, 422, 429),
    "GET /experiments/{experiment_id}/agents/{agent_id}": (401, 404, 422),
    "GET /experiments/{experiment_id}/agents/{agent_id}/files": (401, 404, 409, 422),
    "GET /experiments/{experiment_id}/agents/{agent_id}/files/{path}": (401, 404, 409, 422),
    "GET /experiments/{experiment_id}/report": (401, 404),
    "GET /experiments/{experiment_id}/report/data": (401, 404),
}

_ID = "0123456789ab"
#: Per code: when it is answered, and an example body.
_ERRORS: dict[int, tuple[str, Any]] = {
    400: ("A read-only SQL query refused, with the reason", "query refused: COPY is not allowed"),
    401: ("No bearer token, or an unknown one", "this service needs 'Authorization: Bearer <token>' (in a browser: sign in at /login)"),
    404: ("No such experiment, dataset or agent, or an experiment of another owner", f"experiment {_ID!r} not found"),
    406: ("The Accept header names no representation this route has", "cannot answer Accept: image/png"),
    409: ("The experiment's status does not allow this (cancel a finished one; delete, resume, steps or fork on a live one), "
          "or a tick it no longer keeps, or an Idempotency-Key reused with another body",
          f"cannot delete experiment {_ID!r}: it is running; cancel it first"),
    413: ("The request body is over the size limit", "the request body is over the limit of 1048576 bytes"),
    415: ("The body is neither application/json nor application/yaml",
          "the body must be application/json or application/yaml, not text/csv"),
    429: ("The caller's share of concurrent SQL queries, fidelity scorings or open event streams is in use (or the "
          "service's), or their LLM calls for today are used up; retry after Retry-After seconds",
          "lab-a has 2 SQL queries open, the most one owner may (POLIS_SQL_MAX_CONCURRENT_PER_OWNER=2)"),
    422: ("The body is invalid, over a quota, or names a credential not granted; loc gives the field path",
          [{"type": "spec_error", "loc": ["body", "population", 0, "count"],
            "msg": "population.0.count: 1000000 agents is over this owner's quota of 1000"}]),
}
_SCHEMES = "#/components/schemas/"
_BEARER_SCHEME = "bearerAuth"


def error_example(detail: object) -> dict[str, object]:
    """A route's ``responses`` entry body: an example error answer with ``detail``."""
    return {"content": {"application/json": {"example": {"detail": detail}}}}


def add_error_responses(schema: dict[str, Any], table: dict[str, tuple[int, ...]] = ROUTE_ERRORS) -> dict[str, Any]:
    """Declare each operation's error responses in an OpenAPI document, in place.

    Args:
        schema: the document (``app.openapi()`` as FastAPI builds it).
        table: the error codes per operation; operations not in it keep FastAPI's own declarations.

    Returns:
        ``schema``, with an ``ErrorBody`` response and example per code, and the bearer scheme.
    """
    components = schema.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    body_schema = ErrorBody.model_json_schema(ref_template=_SCHEMES + "{model}")
    schemas.update(body_schema.pop("$defs", {}))
    schemas["ErrorBody"] = body_schema
    components.setdefault("securitySchemes", {})[_BEARER_SCHEME] = {"type": "http", "scheme": "bearer"}
    for path, operations in schema.get("paths", {}).items():
        for method, operation in operations.items():
            key = f"{method.upper()} {path}"
            codes = table.get(key, ())
            if 401 in codes:
                operation["security"] = [{_BEARER_SCHEME: []}]
            responses = operation.setdefault("responses", {})
            for code in codes:
                description, example = _ERRORS[code]
                responses[str(code)] = {
                    "description": description,
                    "content": {"application/json": {"schema": {"$ref": _SCHEMES + "ErrorBody"},
                                                     "example": {"detail": example}}},
                }
    return schema


def declare_errors(app: FastAPI) -> None:
    """Make ``app.openapi()`` declare the error responses of :data:`ROUTE_ERRORS` (call once every route is included)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            add_error_responses(FastAPI.openapi(app))
        assert app.openapi_schema is not None
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]

