"""Live progress: an in-memory, bounded log of events per experiment, and waiting for the next one.

Four kinds of event, each numbered per experiment (the Server-Sent Events ``id``):

- ``status``: the record's status changed (``{"status", "error"}``);
- ``tick``: a tick ended (:meth:`engine.run_progress.RunProgress.to_json`: ticks and
  agent-steps done and total, LLM calls, tokens, cost, errors);
- ``phase``: the run entered a phase (the same JSON, its ``phase`` set: loading the model, creating
  workspaces, a tick, a questionnaire, committing ...), so a client shows what a run does from its first second;
- ``final``: the experiment ended (the record's fields, its spec left out).

The log lives in the service process: a restarted service starts a new log for each experiment,
seeded from its record (its status, and its final event if it has ended), numbered from 1 again.
Only the newest ``max_events`` events of each experiment are kept.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any, Literal

from engine.run_status import ENDED_STATUSES, RunStatus
from service.registry import ExperimentRecord

__all__ = ["FINAL_STATUSES", "Event", "EventHub", "EventLog", "EventName", "final_data"]

EventName = Literal["status", "tick", "phase", "final"]

#: Statuses after which an experiment changes no more unless it is resumed (they get a ``final`` event).
FINAL_STATUSES: frozenset[RunStatus] = ENDED_STATUSES | {RunStatus.INTERRUPTED}


@dataclass(frozen=True)
class Event:
    """One event of an experiment."""

    seq: int  #: its number in the experiment's log, from 1
    name: EventName
    data: dict[str, Any]  #: JSON-ready

    def encode(self) -> bytes:
        """The event in the Server-Sent Events wire format."""
        return f"id: {self.seq}\nevent: {self.name}\ndata: {json.dumps(self.data, separators=(',', ':'))}\n\n".encode()


class EventLog:
    """The newest events of one experiment, and waiters for the next.

    ``append`` may be called from any thread; waiting happens on the event loop that called ``wait``.

    Args:
        max_events: how many events to keep (older ones are dropped first).
    """

    def __init__(self, max_events: int = 1024) -> None:
        self._events: deque[Event] = deque(maxlen=max_events)
        self._seq = 0
        self._lock = threading.Lock()
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    @property
    def last_seq(self) -> int:
        """The number of the newest event; 0 before the first."""
        return self._seq

    def append(self, name: EventName, data: dict[str, Any]) -> Event:
        """Add an event and wake everyone waiting for one."""
        with self._lock:
            self._seq += 1
            event = Event(self._seq, name, data)
            self._events.append(event)
            waiters, self._waiters = self._waiters, []
        for loop, future in waiters:
            loop.call_soon_threadsafe(_resolve, future)
        return event

    def since(self, seq: int) -> list[Event]:
        """The kept events numbered after ``seq``, oldest first."""
        with self._lock:
            return [event for event in self._events if event.seq > seq]

    def ended_at(self, seq: int) -> bool:
        """Whether the newest event is a ``final`` one and a reader at ``seq`` has seen it."""
        with self._lock:
            return bool(self._events) and self._events[-1].name == "final" and seq >= self._seq

    async def wait(self, seq: int, timeout: float) -> bool:
        """Wait until there is an event after ``seq``, at most ``timeout`` seconds.

        Returns:
            True when there is one, False on timeout.
        """
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._seq > seq:
                return True
            future: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, future))
        try:
            await asyncio.wait_for(future, timeout)
        except TimeoutError:
            return False
        finally:
            with self._lock:
                if (loop, future) in self._waiters:
                    self._waiters.remove((loop, future))
        return True


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class EventHub:
    """The event logs of every experiment this service process has seen.

    Args:
        max_events: how many events each experiment's log keeps.
        heartbeat_s: how often an idle event stream sends a comment, so proxies keep it open.
        max_logs: how many logs to keep; past it, the logs of the experiments that ended longest ago are
            dropped (opened again, such a log starts over from the record: its status and final event).
    """

    def __init__(self, max_events: int = 1024, heartbeat_s: float = 15.0, max_logs: int = 1000) -> None:
        self.max_events = max_events
        self.heartbeat_s = heartbeat_s
        self.max_logs = max_logs
        self._logs: dict[str, EventLog] = {}
        self._ended: dict[str, None] = {}  # the logs whose last event is final, in the order they ended
        self._lock = threading.Lock()

    def open(self, record: ExperimentRecord) -> EventLog:
        """The experiment's log; a new one starts with its current status (and final event, if it has ended)."""
        with self._lock:
            log = self._logs.get(record.id)
            if log is None:
                log = self._logs[record.id] = EventLog(self.max_events)
                log.append("status", _status_data(record))
                if record.status in FINAL_STATUSES:
                    log.append("final", final_data(record))
                    self._ended[record.id] = None
                self._evict()
        return log

    def _evict(self) -> None:
        # Constant time per open: the ended logs are kept in order, so no scan of the live ones.
        while len(self._logs) > self.max_logs and self._ended:
            experiment_id = next(iter(self._ended))
            del self._ended[experiment_id]
            self._logs.pop(experiment_id, None)

    def status_changed(self, record: ExperimentRecord) -> None:
        """Publish a record's new status, and its final event when the status is final."""
        log = self._logs.get(record.id)
        if log is None:
            self.open(record)  # seeds the status (and final) events itself
            return
        log.append("status", _status_data(record))
        with self._lock:
            self._ended.pop(record.id, None)  # running again (resumed), or ending now: it goes last
            if record.status in FINAL_STATUSES:
                log.append("final", final_data(record))
                self._ended[record.id] = None

    def tick(self, experiment_id: str, progress: dict[str, Any]) -> None:
        """Publish the progress at the end of a tick (``RunProgress.to_json()``; only to an open log)."""
        log = self._logs.get(experiment_id)
        if log is not None:
            log.append("tick", progress)

    def phase(self, experiment_id: str, progress: dict[str, Any]) -> None:
        """Publish the progress as a run enters a phase (``RunProgress.to_json()``; only to an open log)."""
        log = self._logs.get(experiment_id)
        if log is not None:
            log.append("phase", progress)

    def forget(self, experiment_id: str) -> None:
        """Drop an experiment's log (it was deleted)."""
        with self._lock:
            self._logs.pop(experiment_id, None)
            self._ended.pop(experiment_id, None)


def final_data(record: ExperimentRecord) -> dict[str, Any]:
    """What a ``final`` event carries: the record's fields as JSON, without the spec."""
    return record.model_dump(mode="json", exclude={"spec"})


def _status_data(record: ExperimentRecord) -> dict[str, Any]:
    return {"status": str(record.status), "error": record.error}
