"""What one request may ask of the service, whatever its route: a bounded body, and short error echoes.

:class:`BodyLimit` is an ASGI middleware in front of every route: a body that declares, or streams, more than
``POLIS_MAX_BODY_BYTES`` is answered 413 before any route reads it, so no route holds more than that in memory
for one request (a route that reads its own body, the submit, refuses at the same limit while streaming).
:func:`validation_error_response` answers request validation errors (422) in FastAPI's shape, each offending
input cut to a short excerpt: a request is never echoed back whole.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

__all__ = ["EXCERPT_CHARS", "BodyLimit", "excerpt", "validation_error_response"]

#: The most characters of a request's input an error message shows.
EXCERPT_CHARS = 200

Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]


def excerpt(value: Any, limit: int = EXCERPT_CHARS) -> Any:
    """``value`` if its JSON is at most ``limit`` characters, else the start of that JSON and how long it was."""
    try:
        text = json.dumps(jsonable_encoder(value), ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) <= limit:
        return value
    return f"{text[:limit]}... ({len(text):,} characters)"


async def validation_error_response(request: Request, error: Exception) -> JSONResponse:
    """422 with FastAPI's ``detail`` list, each item's ``input`` (and ``ctx``) cut to :func:`excerpt`."""
    assert isinstance(error, RequestValidationError)
    items = []
    for item in error.errors():
        item = dict(item)
        for key in ("input", "ctx"):
            if key in item:
                item[key] = excerpt(item[key])
        items.append(item)
    return JSONResponse(status_code=422, content={"detail": jsonable_encoder(items)})


class BodyLimit:
    """Refuse (413) a request whose body declares or streams more than ``max_bytes``; pass the rest on whole.

    The body is read here, up to the limit, and handed to the route as one message, so a route reading its body
    sees it as the client sent it.

    Args:
        app: the application behind it.
        max_bytes: the largest body accepted.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: MutableMapping[str, Any], receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] in ("GET", "HEAD", "OPTIONS", "DELETE"):
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send, f"the body declares {int(declared)} bytes; at most {self.max_bytes} are accepted "
                                     "(POLIS_MAX_BODY_BYTES)")
            return
        chunks: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":  # the client went away: nothing to answer
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_bytes:
                await self._refuse(send, f"the body is over {self.max_bytes} bytes, the most accepted (POLIS_MAX_BODY_BYTES)")
                return
            chunks.append(chunk)
            more = bool(message.get("more_body", False))
        body, delivered = b"".join(chunks), False

        async def replay() -> Message:
            nonlocal delivered
            if not delivered:
                delivered = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: the disconnect, when it comes

        await self.app(scope, replay, send)

    @staticmethod
    async def _refuse(send: Send, detail: str) -> None:
        payload = json.dumps({"detail": detail}).encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode()),
                                (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": payload})
