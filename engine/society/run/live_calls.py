"""Live counts: batches tell the driver their LLM calls (and finished agents) as they happen, not only in their results.

A batch task's result carries its final tallies, and it arrives once the whole batch is done: with a slow
model that is a minute of a frozen counter. So while a batch runs, each LLM call its agents make (every
record a :class:`~engine.llm.meter.Meter` takes, through :data:`~engine.llm.meter.call_listener`) and each
agent it finishes go into a :class:`LiveTally`, which the worker sends to the driver at most once every
:data:`LIVE_INTERVAL_S` per batch. The driver folds those messages into :class:`LiveCalls`, whose sums
:func:`fold_live` adds to the progress report. The batch's result stays authoritative: when it arrives the
batch's live estimate is dropped and its final tallies count instead, a message that comes later is ignored,
an older (or a retried attempt's) lower count never lowers the estimate, and the estimates of a fan-out that
ended without a result (a failed attempt) are dropped with it. So the live figure never adds to a batch
that has its result, and never counts a batch twice. It can step down once: when a batch's result counts
less than was heard from it (an agent the budget stopped mid-step made calls its missing row does not count).

How a message travels: ``Worker.log_event`` on one shared topic (:data:`LIVE_TOPIC`), which the driver's
client subscribes to (``Client.subscribe_topic``) while a run listens. Chosen because the worker sends it
on the batched stream it already keeps to the scheduler, without waiting for a reply, and the scheduler
pushes it to the subscribed client: no round trip on the worker's event loop, no polling on the driver.
Measured here, its messages of a batch reach the driver before that batch's result (both travel the
worker's stream, in order). The alternatives cost more: a ``distributed.Queue`` or ``Variable`` costs a
scheduler round trip per put plus a driver that polls, and ``distributed.Pub``/``Sub`` is gone from
distributed 2026. The scheduler keeps each topic's last ``distributed.admin.low-level-log-length``
events (1,000), so one shared topic, its messages naming their run, bounds what runs leave behind on a
long-lived scheduler; one topic per run would leave 1,000 events per run. Batches publish only when the
driver listens (a job's ``live_scope`` is set by :meth:`LiveCalls.open`).

Overhead, measured with ``benchmarks/live_calls.py`` (2 shared cores, LocalCluster of 2 workers, the simulated LLM,
1,000 agents x 4 ticks of one call each): counting costs 0.25 us per call; 16 messages carried a run's 4,001 calls;
the warm rate with live counts on was 0.94 and 1.04 times the rate with them off (best of 3 and of 4 alternated
rounds), inside the 490-740 agent-steps/s spread of the rounds themselves.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
import uuid
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from distributed import Client, get_worker

from engine.llm.meter import CallRecord, call_listener
from engine.run_progress import RunPhase, RunProgress

__all__ = [
    "LIVE_INTERVAL_S",
    "LIVE_TOPIC",
    "LiveCalls",
    "listening_here",
    "LivePublisher",
    "LiveTally",
    "fold_live",
    "listening",
    "publishing",
]

T = TypeVar("T")

#: The topic every batch logs its live counts on (one for all runs; each message names its run).
LIVE_TOPIC = "polis-live-counts"
#: The least time between two messages of one batch, in seconds.
LIVE_INTERVAL_S = 0.25

_COUNTS = ("calls", "input_tokens", "output_tokens", "done")


# ---- the worker's side -----------------------------------------------------------------------------------
@dataclass
class LiveTally:
    """One batch's LLM calls and finished items so far, and when the driver may next be told (sans-IO).

    Args:
        interval_s: the least time between two messages.
    """

    interval_s: float = LIVE_INTERVAL_S
    calls: int = 0  #: LLM calls recorded so far (failed and cached ones included, as a ``Meter`` counts them)
    input_tokens: int = 0
    output_tokens: int = 0
    done: int = 0  #: items finished: agent-steps stepped (a tick), answers given (a questionnaire)
    _sent_at: float = field(default=float("-inf"), repr=False)
    _pending: bool = field(default=False, repr=False)

    def add_call(self, record: CallRecord) -> None:
        self.calls += 1
        self.input_tokens += record.input_tokens
        self.output_tokens += record.output_tokens

    def add_done(self, items: int) -> None:
        self.done += items

    def due_in(self, now: float) -> float | None:
        """After a change: in how many seconds to send (0: now); None: a send is already due, it will carry the change."""
        if self._pending:
            return None
        self._pending = True
        return max(0.0, self._sent_at + self.interval_s - now)

    def message(self, now: float, *, run: str, scope: str, batch: int) -> dict[str, Any]:
        """The message that tells the counts so far (msgpack-ready); the next one is due ``interval_s`` after ``now``."""
        self._pending, self._sent_at = False, now
        return {"run": run, "scope": scope, "batch": batch, **{name: getattr(self, name) for name in _COUNTS}}


class LivePublisher:
    """One batch task's :class:`LiveTally`, sent to the driver through the worker's event log (the Dask shell).

    Use :func:`publishing`; a silent publisher (no scope, or not on a worker) counts nothing and sends nothing.
    """

    def __init__(self, send: Callable[[dict[str, Any]], None] | None, *, run: str, scope: str, batch: int,
                 interval_s: float = LIVE_INTERVAL_S) -> None:
        self._send = send
        self._run, self._scope, self._batch = run, scope, batch
        self.tally = LiveTally(interval_s)
        self._timer: asyncio.TimerHandle | None = None
        self._loop = asyncio.get_running_loop() if send is not None else None

    @classmethod
    def silent(cls) -> LivePublisher:
        return cls(None, run="", scope="", batch=0)

    def call(self, record: CallRecord) -> None:
        """A call was recorded (the :data:`~engine.llm.meter.call_listener` of the batch's agents)."""
        if self._send is not None:
            self.tally.add_call(record)
            self._schedule()

    def finished(self, items: int = 1) -> None:
        """``items`` of the batch are done."""
        if self._send is not None and items:
            self.tally.add_done(items)
            self._schedule()

    async def counted(self, work: Awaitable[T], items: Callable[[T], int]) -> T:
        """Await ``work``, then count ``items(result)`` as finished."""
        result = await work
        self.finished(items(result))
        return result

    def _schedule(self) -> None:
        assert self._loop is not None
        delay = self.tally.due_in(time.monotonic())
        if delay is not None:
            self._timer = self._loop.call_later(delay, self._flush)

    def _flush(self) -> None:
        self._timer = None
        assert self._send is not None
        self._send(self.tally.message(time.monotonic(), run=self._run, scope=self._scope, batch=self._batch))

    def close(self) -> None:
        """Send nothing more: the batch's result is on its way and replaces the estimate."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None


@contextlib.contextmanager
def publishing(scope: str | None, *, run: str, batch: int, interval_s: float = LIVE_INTERVAL_S) -> Iterator[LivePublisher]:
    """Count the LLM calls recorded inside the block (and the items it reports finished) and send them to the driver.

    Call it in the batch task, on the worker's event loop, before the agents' tasks are created: they inherit
    the listener. Off a worker, a run listening in this process (:func:`listening_here`) gets the messages
    directly. ``scope`` None (nobody listens), or neither (a test calling the task directly), gives a silent publisher.
    """
    worker = _current_worker() if scope is not None else None
    here = _HERE.get(run)
    if scope is None or (worker is None and here is None):
        yield LivePublisher.silent()
        return
    send = here if worker is None else (lambda message: worker.log_event(LIVE_TOPIC, message))
    publisher = LivePublisher(send, run=run, scope=scope, batch=batch, interval_s=interval_s)
    token = call_listener.set(publisher.call)
    try:
        yield publisher
    finally:
        call_listener.reset(token)
        publisher.close()


def _current_worker() -> Any:
    try:
        return get_worker()
    except ValueError:  # not inside a task on a worker
        return None


# ---- the driver's side -----------------------------------------------------------------------------------
@dataclass
class _Estimate:
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    done: int = 0


class LiveCalls:
    """The live estimates of one fan-out's batches in flight, folded with their results (sans-IO).

    The society opens it per fan-out (a tick's batches, a questionnaire's), marks each batch
    :meth:`finished` when its result has been counted, and closes it when the fan-out ends.
    """

    def __init__(self) -> None:
        self.scope: str | None = None  #: the open fan-out's scope (jobs carry it); None: none open
        self._live: dict[int, _Estimate] = {}
        self._finished: set[int] = set()
        self._sums = _Estimate()

    def open(self) -> str:
        """Start a fan-out: earlier estimates go; returns the scope its jobs publish under."""
        self.close()
        self.scope = uuid.uuid4().hex
        return self.scope

    def heard(self, message: Mapping[str, Any]) -> bool:
        """Fold one worker's message; True when an estimate rose (a message of another fan-out, of a finished
        batch, or not above what was heard, changes nothing)."""
        batch = message.get("batch")
        if self.scope is None or message.get("scope") != self.scope or not isinstance(batch, int) or batch in self._finished:
            return False
        before = self._live.get(batch, _Estimate())
        after = _Estimate(*(max(getattr(before, name), int(message.get(name) or 0)) for name in _COUNTS))
        if after == before:
            return False
        self._live[batch] = after
        self._add(after, before)
        return True

    def finished(self, batch: int) -> None:
        """The batch's result has been counted: its estimate goes, and later messages of it are ignored."""
        self._finished.add(batch)
        if (estimate := self._live.pop(batch, None)) is not None:
            self._add(_Estimate(), estimate)

    def close(self) -> None:
        """The fan-out ended (or failed): every estimate goes."""
        self.scope = None
        self._live.clear()
        self._finished.clear()
        self._sums = _Estimate()

    def _add(self, new: _Estimate, old: _Estimate) -> None:
        for name in _COUNTS:
            setattr(self._sums, name, getattr(self._sums, name) + getattr(new, name) - getattr(old, name))

    @property
    def calls(self) -> int:
        return self._sums.calls

    @property
    def input_tokens(self) -> int:
        return self._sums.input_tokens

    @property
    def output_tokens(self) -> int:
        return self._sums.output_tokens

    @property
    def done(self) -> int:
        """Items the batches in flight finished: agent-steps in a tick, answers in a questionnaire."""
        return self._sums.done


def fold_live(progress: RunProgress, live: LiveCalls) -> RunProgress:
    """``progress`` (counted from batch results) plus the live estimates of the batches still running.

    Calls and tokens add to the LLM usage; finished items add to the agent-steps in a tick, and to the
    phase's count in a questionnaire (never past their totals).
    """
    changes: dict[str, Any] = {
        "llm_calls": progress.llm_calls + live.calls,
        "input_tokens": progress.input_tokens + live.input_tokens,
        "output_tokens": progress.output_tokens + live.output_tokens,
    }
    if live.done and progress.phase == RunPhase.TICK:
        changes["agent_steps_done"] = min(progress.agent_steps_done + live.done, progress.agent_steps_total)
    elif live.done and progress.phase == RunPhase.QUESTIONNAIRE and progress.phase_done is not None:
        done = progress.phase_done + live.done
        changes["phase_done"] = done if progress.phase_total is None else min(done, progress.phase_total)
    return dataclasses.replace(progress, **changes)


class _TopicRouter:
    """A client's one subscription to :data:`LIVE_TOPIC`, handing each message to the run it names."""

    def __init__(self) -> None:
        self.runs: dict[str, Callable[[Mapping[str, Any]], None]] = {}

    def __call__(self, event: tuple[float, Any]) -> None:
        _, message = event
        if isinstance(message, Mapping) and (handler := self.runs.get(str(message.get("run")))) is not None:
            handler(message)


#: each client's router while one of its runs listens (weak: a closed client's goes with it)
_ROUTERS: weakref.WeakKeyDictionary[Client, _TopicRouter] = weakref.WeakKeyDictionary()


#: runs of the in-process shell listening in this process: their batches hand messages over directly
_HERE: dict[str, Callable[[Mapping[str, Any]], None]] = {}


@contextlib.contextmanager
def listening_here(run: str, live: LiveCalls, on_heard: Callable[[], None]) -> Iterator[LiveCalls]:
    """:func:`listening` for batches running in this process (the in-process shell): no topic, no client."""

    def heard(message: Mapping[str, Any]) -> None:
        if live.heard(message):
            on_heard()

    _HERE[run] = heard
    try:
        yield live
    finally:
        _HERE.pop(run, None)
        live.close()


@contextlib.asynccontextmanager
async def listening(client: Client, run: str, live: LiveCalls, on_heard: Callable[[], None]) -> AsyncIterator[LiveCalls]:
    """Fold the live messages of run ``run`` into ``live`` while the block runs; ``on_heard`` is called (on the
    client's event loop) whenever an estimate rose.

    Runs sharing a client share its one subscription to :data:`LIVE_TOPIC`.
    """
    router = _ROUTERS.get(client)
    if router is None:
        router = _ROUTERS[client] = _TopicRouter()
        client.subscribe_topic(LIVE_TOPIC, router)

    def heard(message: Mapping[str, Any]) -> None:
        if live.heard(message):
            on_heard()

    router.runs[run] = heard
    try:
        yield live
    finally:
        router.runs.pop(run, None)
        live.close()
        if not router.runs:
            del _ROUTERS[client]
            with contextlib.suppress(Exception):  # noqa: BLE001 - a closed client has no subscription left to end
                client.unsubscribe_topic(LIVE_TOPIC)
