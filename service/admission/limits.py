"""What requests may ask of the service: a bounded body on every route, short error echoes, and slots that no
owner can take all of.

:class:`BodyLimit` is an ASGI middleware in front of every route: a body that declares, or streams, more than
``POLIS_MAX_BODY_BYTES`` is answered 413 before any route reads it, so no route holds more than that in memory
for one request (a route that reads its own body, the submit, refuses at the same limit while streaming).
:func:`validation_error_response` answers request validation errors (422) in FastAPI's shape, each offending
input cut to a short excerpt: a request is never echoed back whole. :class:`Slots` counts what is held across
requests (SQL queries, event streams) per owner and in all, and refuses (429) what would go past either cap.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any

from fastapi import Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse

from service.errors import TooManyRequestsError

__all__ = ["EXCERPT_CHARS", "BodyLimit", "Slots", "excerpt", "validation_error_response"]

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


class Slots:
    """What requests hold at once, counted per owner and in all (thread-safe; nothing waits: a full cap refuses).

    Args:
        what: what is held, for the 429's message (``"SQL queries"``).
        per_owner: the most one owner holds at once (and the setting that says so, for the message).
        total: the most held over all owners; None: no such cap.
    """

    def __init__(self, what: str, per_owner: tuple[int, str], total: tuple[int, str] | None = None) -> None:
        self.what = what
        self.per_owner, self.total = per_owner, total
        self._held: Counter[str] = Counter()
        self._lock = threading.Lock()

    def held(self, owner: str | None = None) -> int:
        """How many ``owner`` holds (None: everyone)."""
        with self._lock:
            return self._held[owner] if owner is not None else sum(self._held.values())

    def check(self, owner: str) -> None:
        """Refuse now if ``owner`` could not take one more (for a stream, which takes its slot once it starts).

        Raises:
            TooManyRequestsError: a cap is reached; the message says which and what is in use.
        """
        with self._lock:
            self._refuse_if_full(owner)

    def _refuse_if_full(self, owner: str) -> None:
        limit, setting = self.per_owner
        if self._held[owner] >= limit:
            raise TooManyRequestsError(f"{owner} has {self._held[owner]} {self.what} open, the most one owner may "
                                       f"({setting}={limit}); retry when one ends")
        if self.total is not None and sum(self._held.values()) >= self.total[0]:
            raise TooManyRequestsError(f"the service has {sum(self._held.values())} {self.what} open, the most it runs "
                                       f"at once ({self.total[1]}={self.total[0]}); retry shortly")

    @contextlib.contextmanager
    def hold(self, owner: str, *, checked: bool = True) -> Iterator[None]:
        """Hold one slot for ``owner`` while the block runs.

        Args:
            owner: who holds it.
            checked: refuse when a cap is reached (False: take it anyway, after :meth:`check` passed earlier).

        Raises:
            TooManyRequestsError: a cap is reached (with ``checked``).
        """
        with self._lock:
            if checked:
                self._refuse_if_full(owner)
            self._held[owner] += 1
        try:
            yield
        finally:
            with self._lock:
                self._held[owner] -= 1
                if not self._held[owner]:
                    del self._held[owner]
