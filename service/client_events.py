"""Reading ``GET /experiments/{id}/events`` on the client side: a sans-IO Server-Sent Events parser and a progress line.

The parser follows the WHATWG event-stream rules the service writes to: ``event:``, ``data:``
(several lines join with newlines), ``id:`` and ``retry:`` fields, ``:`` comments (keep-alives), and
a blank line ending each event. It sees lines, never sockets, so tests feed it directly.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from engine.run_progress import RunProgress, render_progress
from engine.run_status import RunStatus

__all__ = ["EventStreamParser", "ServerSentEvent", "progress_line"]


@dataclass(frozen=True)
class ServerSentEvent:
    """One event of the stream."""

    event: str  #: ``status``, ``tick`` or ``final`` (``message`` if the server named none)
    data: str  #: the raw ``data:`` payload (JSON for the service's events)
    id: str | None  #: the per-experiment sequence number to resume from (``Last-Event-ID``)

    def json(self) -> Any:
        """The payload decoded as JSON."""
        return json.loads(self.data)


class EventStreamParser:
    """Turns the lines of an event stream into events.

    ``last_event_id`` is the id to send as ``Last-Event-ID`` when re-opening a dropped stream, and
    ``retry_ms`` the reconnection delay the server last asked for (None: it asked none).
    """

    def __init__(self, last_event_id: str | None = None) -> None:
        self.last_event_id = last_event_id
        self.retry_ms: int | None = None
        self._event = ""
        self._data: list[str] = []

    def feed(self, line: str) -> ServerSentEvent | None:
        """Take one line (without its line ending); return the event it completes, if any."""
        if line == "":
            return self._dispatch()
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "event":
            self._event = value
        elif name == "data":
            self._data.append(value)
        elif name == "id":
            if "\0" not in value:
                self.last_event_id = value
        elif name == "retry" and value.isdigit():
            self.retry_ms = int(value)
        return None

    def _dispatch(self) -> ServerSentEvent | None:
        event, data = self._event or "message", self._data
        self._event, self._data = "", []
        if not data:
            return None
        return ServerSentEvent(event=event, data="\n".join(data), id=self.last_event_id)


def progress_line(data: dict[str, Any]) -> str:
    """The progress line of ``polis run`` (``engine.run_progress.render_progress``) for an event's or a detail's data.

    Args:
        data: a ``tick`` event's JSON (a ``RunProgress``), or an experiment's detail (counters under ``progress``).

    Returns:
        e.g. ``[#####.....] tick 1/2 agent-steps 4/8 llm 8 calls 960 tok running``.
    """
    counts = data.get("progress", data)
    status = data.get("status", counts.get("status", RunStatus.RUNNING))
    zero = dict.fromkeys(("ticks_done", "ticks_total", "agent_steps_done", "agent_steps_total"), 0)
    return render_progress(RunProgress.from_json({**zero, **counts, "status": status})).rstrip()
