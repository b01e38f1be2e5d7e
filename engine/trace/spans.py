"""Spans: timed, nested records of what the simulation did. Sans-IO; :mod:`.writer` persists them.

A :class:`TraceRecorder` collects finished :class:`Span` objects in memory. The span that is open
in the current context (thread or asyncio task) becomes the parent of spans opened inside it, so
nesting follows the code; concurrent asyncio tasks each keep their own current span.
"""

from __future__ import annotations

import copy
import secrets
import threading
import time
import uuid
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal

__all__ = ["ActiveSpan", "Span", "SpanRef", "SpanStatus", "TraceRecorder", "current_span", "new_trace_id"]

SpanStatus = Literal["ok", "error"]


def new_trace_id() -> str:
    """Return a fresh trace id (32 hex digits)."""
    return uuid.uuid4().hex


def _new_span_id() -> str:
    return secrets.token_hex(8)


@dataclass(frozen=True, slots=True)
class SpanRef:
    """The identity of a span, enough to parent spans to it from another process."""

    #: The trace the span belongs to.
    trace_id: str
    #: The span's own id.
    span_id: str


@dataclass(frozen=True)
class Span:
    """One finished span."""

    #: The trace (e.g. one run or one tick) this span belongs to.
    trace_id: str
    #: This span's id, unique within the trace.
    span_id: str
    #: The enclosing span's id, or ``None`` for a root span.
    parent_id: str | None
    #: What was done, e.g. ``"tick"`` or ``"llm.call"``.
    name: str
    #: Wall-clock start, milliseconds since the Unix epoch.
    start_unix_ms: float
    #: Elapsed time measured with :func:`time.perf_counter`, in milliseconds.
    duration_ms: float
    #: ``"error"`` if the body raised.
    status: SpanStatus
    #: Free-form attributes; ``error`` holds the exception when the status is ``"error"``.
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def ref(self) -> SpanRef:
        """This span's identity."""
        return SpanRef(self.trace_id, self.span_id)

    def to_dict(self) -> dict[str, Any]:
        """Return the span as a JSON-ready dict (the trace shard line format).

        Built field by field: ``dataclasses.asdict`` deep-copies recursively and cost ~150 us a span, which a tick
        of a million env requests (one span each) paid for seconds."""
        return {"trace_id": self.trace_id, "span_id": self.span_id, "parent_id": self.parent_id, "name": self.name,
                "start_unix_ms": self.start_unix_ms, "duration_ms": self.duration_ms, "status": self.status,
                "attrs": copy.deepcopy(self.attrs) if any(isinstance(v, dict | list) for v in self.attrs.values())
                else dict(self.attrs)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Span:
        """Build a span from :meth:`to_dict` output."""
        return cls(**{**data, "attrs": dict(data.get("attrs") or {})})


class ActiveSpan:
    """A span that is still open; attributes can be added until it closes.

    Args:
        trace_id: the trace it belongs to.
        span_id: its id.
        parent_id: the enclosing span's id, if any.
        name: what is being done.
        attrs: initial attributes.
    """

    def __init__(self, trace_id: str, span_id: str, parent_id: str | None, name: str, attrs: dict[str, Any]) -> None:
        self.trace_id = trace_id
        self.span_id = span_id
        self.parent_id = parent_id
        self.name = name
        self.attrs = attrs

    @property
    def ref(self) -> SpanRef:
        """This span's identity, e.g. to pass to a Dask task as its parent."""
        return SpanRef(self.trace_id, self.span_id)

    def set(self, **attrs: Any) -> None:
        """Add or replace attributes."""
        self.attrs.update(attrs)


_current: ContextVar[ActiveSpan | None] = ContextVar("polis_current_span", default=None)


def current_span() -> ActiveSpan | None:
    """Return the span open in this context, if any."""
    return _current.get()


class _SpanScope:
    """Context manager behind :meth:`TraceRecorder.span`; works with ``with`` and ``async with``."""

    def __init__(self, recorder: TraceRecorder, active: ActiveSpan) -> None:
        self._recorder = recorder
        self._active = active
        self._token: Token[ActiveSpan | None] | None = None
        self._start_unix_ms = 0.0
        self._t0 = 0.0

    def __enter__(self) -> ActiveSpan:
        self._token = _current.set(self._active)
        self._start_unix_ms = time.time() * 1000.0
        self._t0 = time.perf_counter()
        return self._active

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        duration_ms = (time.perf_counter() - self._t0) * 1000.0
        if self._token is not None:
            _current.reset(self._token)
        active = self._active
        attrs = dict(active.attrs)
        if exc is not None:
            attrs["error"] = f"{type(exc).__name__}: {exc}"
        span = Span(
            trace_id=active.trace_id,
            span_id=active.span_id,
            parent_id=active.parent_id,
            name=active.name,
            start_unix_ms=self._start_unix_ms,
            duration_ms=duration_ms,
            status="ok" if exc is None else "error",
            attrs=attrs,
        )
        self._recorder.record(span)
        # Returning None re-raises the body's exception.

    async def __aenter__(self) -> ActiveSpan:
        return self.__enter__()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.__exit__(exc_type, exc, tb)


class TraceRecorder:
    """Collect finished spans in memory, in the order they finish. Thread-safe."""

    def __init__(self) -> None:
        self._spans: list[Span] = []
        self._lock = threading.Lock()

    def span(
        self,
        name: str,
        *,
        trace_id: str | None = None,
        parent: SpanRef | ActiveSpan | Span | None = None,
        **attrs: Any,
    ) -> _SpanScope:
        """Open a span; use as ``with rec.span("tick", step=3) as s:`` (or ``async with``).

        Without ``parent``, the span open in the current context (if it is in the same trace) is
        the parent. The trace id is ``trace_id``, else the parent's, else a new one.

        Args:
            name: what is being done.
            trace_id: the trace to record into.
            parent: an explicit parent, e.g. a :class:`SpanRef` passed from another process.
            **attrs: initial attributes.

        Returns:
            A context manager yielding the :class:`ActiveSpan`. When the body raises, the span is
            recorded with status ``"error"`` and an ``error`` attribute, and the exception propagates.

        Raises:
            ValueError: ``trace_id`` and ``parent`` name different traces.
        """
        if parent is None:
            implicit = _current.get()
            if implicit is not None and (trace_id is None or trace_id == implicit.trace_id):
                parent = implicit
        if parent is not None:
            if trace_id is not None and trace_id != parent.trace_id:
                raise ValueError(f"span {name!r}: trace_id {trace_id} differs from its parent's {parent.trace_id}")
            trace_id = parent.trace_id
        active = ActiveSpan(
            trace_id=trace_id or new_trace_id(),
            span_id=_new_span_id(),
            parent_id=parent.span_id if parent is not None else None,
            name=name,
            attrs=dict(attrs),
        )
        return _SpanScope(self, active)

    def record(self, span: Span) -> None:
        """Add a finished span (e.g. one built elsewhere)."""
        with self._lock:
            self._spans.append(span)

    def spans(self) -> list[Span]:
        """Return a copy of the spans recorded so far."""
        with self._lock:
            return list(self._spans)

    def drain(self) -> list[Span]:
        """Return the spans recorded so far and forget them (e.g. once per tick, before writing)."""
        with self._lock:
            spans, self._spans = self._spans, []
        return spans
