"""``GET /experiments/{id}/events``: an experiment's live progress as Server-Sent Events.

Each event has an ``id:`` (its number in the experiment's log), an ``event:`` name (``status``,
``tick`` or ``final``) and one ``data:`` line of JSON (:mod:`service.events`). A client that
reconnects with ``Last-Event-ID`` gets what it missed, as far as the log still keeps it. The stream
of a finished experiment replays what the log has (at least its status and its final event) and
ends; a live one ends after its final event. An idle stream sends a comment every
``EventHub.heartbeat_s`` seconds.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Header
from fastapi.responses import StreamingResponse

from engine.run_status import RunStatus
from service.admission.auth import Caller
from service.admission.limits import Slots
from service.events import EventLog
from service.state import State

__all__ = ["EVENT_STREAM_MEDIA_TYPE", "router"]

#: The media type of Server-Sent Events.
EVENT_STREAM_MEDIA_TYPE = "text/event-stream"

router = APIRouter(prefix="/experiments", tags=["events"])

_EXAMPLE = (
    f'id: 1\nevent: status\ndata: {{"status":"{RunStatus.QUEUED}","error":null}}\n\n'
    f'id: 3\nevent: tick\ndata: {{"status":"{RunStatus.RUNNING}","ticks_done":1,"ticks_total":2,"agent_steps_done":4,...}}\n\n'
    f'id: 6\nevent: final\ndata: {{"id":"0123456789ab","status":"{RunStatus.COMPLETED}",...}}\n\n'
)


@router.get(
    "/{experiment_id}/events",
    response_class=StreamingResponse,
    responses={200: {
        "content": {EVENT_STREAM_MEDIA_TYPE: {"schema": {"type": "string"}, "example": _EXAMPLE}},
        "description": "status, tick and final events, as Server-Sent Events",
    }},
)
async def experiment_events(
    experiment_id: str,
    state: State,
    caller: Caller,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> StreamingResponse:
    """Stream the experiment's status changes, one event per tick, and a final event."""
    record = state.registry.get(experiment_id, caller)
    state.stream_slots.check(caller.owner)  # 429 when the owner keeps the most streams open already
    log = state.submitter.events.open(record)
    cursor = _cursor(last_event_id, log)
    return StreamingResponse(
        _held(state.stream_slots, caller.owner, _stream(log, cursor, state.submitter.events.heartbeat_s)),
        media_type=EVENT_STREAM_MEDIA_TYPE,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def _cursor(last_event_id: str | None, log: EventLog) -> int:
    """Where to resume from: the client's last event, unless it is not a number of this log."""
    if last_event_id is None or not last_event_id.strip().isdigit() or len(last_event_id.strip()) > 18:
        return 0  # not a number of ours (an event number fits in 18 digits)
    seen = int(last_event_id)
    # A number past the log's end came from an earlier service process: that log is gone, start over.
    return seen if seen <= log.last_seq else 0


async def _held(slots: Slots, owner: str, stream: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """``stream``, counted in ``slots`` while it is open (from its first byte to its end or the client's leaving)."""
    with slots.hold(owner, checked=False):
        async for chunk in stream:
            yield chunk


async def _stream(log: EventLog, cursor: int, heartbeat_s: float) -> AsyncIterator[bytes]:
    while True:
        for event in log.since(cursor):
            yield event.encode()
            cursor = event.seq
        if log.ended_at(cursor):
            return
        if not await log.wait(cursor, heartbeat_s):
            yield b": keepalive\n\n"
