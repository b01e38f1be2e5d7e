"""EventSpace: scheduled public events that agents see coming, announce and attend.

Updates are synchronous, as in MessagingSpace: announcements, sign-ups and cancellations made
during a tick are queued and applied when the tick's env step runs, in (agent id, call order)
order; new events get their ids then (or when an intervention is settled between ticks; the next
step reports those). After applying them the step counts attendance: every agent
signed up for an event that overlaps the tick (``start < t`` and ``end > t - tick``) was present
during that step.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from engine.env.base import EnvBase
from engine.env.modules.times import parse_time
from engine.env.tool import tool
from engine.env.update_queue import Update
from engine.errors import SpecError
from engine.storage.catalog import Column, DatasetSchema

__all__ = ["EventSpace"]

_STATE = DatasetSchema(
    name="events_state",
    kind="env",
    description="EventSpace totals after each env step",
    columns=(
        Column(name="step", type="int64", description="society step (1-based) that just ended"),
        Column(name="t", type="timestamp", description="simulated time at the end of the step"),
        Column(name="events_total", type="int64", description="events known (scheduled and announced)"),
        Column(name="events_active", type="int64", description="events that overlapped this step"),
        Column(name="present", type="int64", description="agent presences at events in this step"),
        Column(name="announced", type="int64", description="events announced by agents in this step"),
        Column(name="signups", type="int64", description="sign-ups applied in this step"),
        Column(name="cancellations", type="int64", description="cancelled sign-ups applied in this step"),
    ),
)
_ATTENDANCE = DatasetSchema(
    name="events_attendance",
    kind="env",
    description="one row per agent present at an event during a step",
    columns=(
        Column(name="step", type="int64", description="society step that just ended"),
        Column(name="t", type="timestamp", description="simulated time at the end of the step"),
        Column(name="event_id", type="int64", description="the event"),
        Column(name="title", type="string", description="the event's title"),
        Column(name="agent_id", type="int64", description="an agent present at it"),
    ),
)
_ACTIONS = DatasetSchema(
    name="events_actions",
    kind="env",
    description="every announcement, sign-up and cancellation, as applied",
    columns=(
        Column(name="step", type="int64", description="step in which it was applied"),
        Column(name="t", type="timestamp", description="simulated time at which it was applied"),
        Column(name="kind", type="string", description="announce | attend | cancel"),
        Column(name="agent_id", type="int64", description="acting agent"),
        Column(name="event_id", type="int64", description="the event (new id for announcements)"),
        Column(name="event", type="json", description="the announced event (announce)"),
    ),
)


class EventSpace(EnvBase):
    """A calendar of public events: agents see what is on now and soon, announce their own events, and sign up to attend.

    Signing up for an event that is under way or still to come counts you as present during every
    step the event overlaps. Announcements and sign-ups take effect at the end of the current step.

    Args:
        events: scheduled events, each ``{title, start, end, location?, description?}`` with ISO times.
        horizon_hours: how far ahead ``upcoming_events`` looks.
        upcoming_limit: most events ``upcoming_events`` lists.
        max_length: longest title, location or description accepted, in characters.
    """

    METRICS = {
        "attendance": "agent presences at events during this step (an agent at two events counts twice)",
        "attendees": "distinct agents present at an event during this step",
        "events_active": "events that overlapped this step",
        "announced": "events agents announced in this step",
        "signups": "sign-ups applied in this step",
        "cancellations": "cancelled sign-ups applied in this step",
    }

    def __init__(
        self,
        events: list[dict[str, Any]] | None = None,
        horizon_hours: float = 24.0,
        upcoming_limit: int = 10,
        max_length: int = 500,
    ) -> None:
        super().__init__()
        if horizon_hours <= 0 or upcoming_limit < 1 or max_length < 1:
            raise SpecError("horizon_hours, upcoming_limit and max_length must be positive")
        self._horizon = timedelta(hours=horizon_hours)
        self._limit = upcoming_limit
        self._max_length = max_length
        self._events: dict[int, dict[str, Any]] = {}
        for i, spec in enumerate(events or []):
            try:
                self._add(self._make(spec.get("title", ""), spec.get("start", ""), spec.get("end", ""),
                                     spec.get("location", ""), spec.get("description", ""), organizer=None))
            except (ValueError, AttributeError) as error:
                raise SpecError(f"EventSpace events[{i}]: {error}") from None
        self._applied_last: list[dict[str, Any]] = []
        self._applied_unreported: list[dict[str, Any]] = []  #: applied since the last step (by apply_pending)
        self._present_last: list[tuple[int, int]] = []
        self._active_last = 0

    def _event(self, event_id: int) -> dict[str, Any]:
        event = self._events.get(event_id)
        if event is None:
            raise ValueError(f"there is no event {event_id} (announced events get their id at the end of the step)")
        return event

    def _make(self, title: str, start: str, end: str, location: str, description: str, organizer: int | None) -> dict[str, Any]:
        title = title.strip()
        if not title:
            raise ValueError("an event needs a title")
        for text in (title, location, description):
            if len(text) > self._max_length:
                raise ValueError(f"text longer than {self._max_length} characters")
        begins, ends = parse_time(start, "start"), parse_time(end, "end")
        if ends <= begins:
            raise ValueError(f"the event must end after it starts ({start} .. {end})")
        return {"title": title, "start": begins, "end": ends, "location": location.strip(),
                "description": description.strip(), "organizer": organizer}

    def _add(self, event: dict[str, Any]) -> int:
        event_id = len(self._events) + 1  # events are never deleted
        self._events[event_id] = {"id": event_id, **event, "attendees": [], "attended": []}
        return event_id

    def _queue(self, kind: str, agent_id: int, event_id: int | None = None, event: dict[str, Any] | None = None) -> None:
        self.updates.queue(agent_id, kind=kind, event_id=event_id, event=_jsonable(event) if event else None)

    def _signed_up_after_own_ops(self, agent_id: int, event_id: int) -> bool:
        signed = agent_id in self._events[event_id]["attendees"]
        for update in self.updates.of(agent_id):
            if update["event_id"] == event_id:
                signed = update["kind"] == "attend"
        return signed

    # ---- acting ------------------------------------------------------------------------------
    @tool(readonly=False)
    def announce_event(self, agent_id: int, title: str, start: str, end: str, location: str = "", description: str = "") -> str:
        """Announce a public event (ISO start and end times); it is listed from the end of this step."""
        self.check_agent(agent_id)
        event = self._make(title, start, end, location, description, organizer=agent_id)
        if self.t is not None and event["end"] <= self.t:
            raise ValueError("the event would already be over")
        self._queue("announce", agent_id, event=event)
        return f"event {event['title']!r} will be announced at the end of this step"

    @tool(readonly=False)
    def attend(self, agent_id: int, event_id: int) -> str:
        """Sign up to attend an event that is under way or upcoming; you are counted as present while it runs."""
        self.check_agent(agent_id)
        event = self._event(event_id)
        if self.t is not None and event["end"] <= self.t:
            raise ValueError(f"event {event_id} ({event['title']}) has already ended")
        if self._signed_up_after_own_ops(agent_id, event_id):
            return f"you are already signed up for event {event_id}"
        self._queue("attend", agent_id, event_id=event_id)
        return f"you are signed up for event {event_id} ({event['title']}) from the end of this step"

    @tool(readonly=False)
    def cancel_attendance(self, agent_id: int, event_id: int) -> str:
        """Withdraw your sign-up for an event."""
        self.check_agent(agent_id)
        self._event(event_id)
        if not self._signed_up_after_own_ops(agent_id, event_id):
            return f"you are not signed up for event {event_id}"
        self._queue("cancel", agent_id, event_id=event_id)
        return f"your sign-up for event {event_id} will be withdrawn at the end of this step"

    # ---- reading -----------------------------------------------------------------------------
    @tool(readonly=True, kind="observe")
    def upcoming_events(self, agent_id: int) -> str:
        """List the events under way now or starting within the horizon, with ids, times, places and sign-ups."""
        now = self.t
        relevant = [e for e in self._events.values() if now is None or (e["end"] > now and e["start"] <= now + self._horizon)]
        if not relevant:
            return "No events are under way or coming up."
        relevant.sort(key=lambda e: (e["start"], e["id"]))
        lines = [self._render(e, agent_id) for e in relevant[: self._limit]]
        return f"Events now and coming up ({len(relevant)}):\n" + "\n".join(lines)

    @tool(readonly=True)
    def event_details(self, agent_id: int, event_id: int) -> str:
        """Show one event in full: description, organizer, sign-ups and how many have attended."""
        event = self._event(event_id)
        organizer = "scheduled" if event["organizer"] is None else f"announced by agent {event['organizer']}"
        return (
            self._render(event, agent_id) + f"\n{organizer}; {len(event['attended'])} agents have attended so far."
            + (f"\n{event['description']}" if event["description"] else "")
        )

    @tool(readonly=True, kind="statistics")
    def event_statistics(self) -> str:
        """Totals: events, events running last step, and attendance."""
        attended = sum(len(e["attended"]) for e in self._events.values())
        return (f"{len(self._events)} events; {self._active_last} ran during the last step with "
                f"{len(self._present_last)} agents present; {attended} distinct attendances in all")

    def _render(self, event: dict[str, Any], viewer: int) -> str:
        when = f"{event['start']:%Y-%m-%d %H:%M} to {event['end']:%Y-%m-%d %H:%M}"
        now = " (under way)" if self.t is not None and event["start"] <= self.t < event["end"] else ""
        where = f" at {event['location']}" if event["location"] else ""
        mine = ", you are signed up" if viewer in event["attendees"] else ""
        return f"- event {event['id']}: {event['title']}{where}, {when}{now}; {len(event['attendees'])} signed up{mine}"

    # ---- the step ----------------------------------------------------------------------------
    def apply_update(self, update: Update) -> None:
        """Apply one announcement (the event gets its id now), sign-up or cancellation."""
        agent, event_id, announced = update.agent_id, update["event_id"], update["event"]
        if update["kind"] == "announce":
            event_id = self._add(_from_jsonable(announced))
        else:
            attendees = set(self._events[event_id]["attendees"])
            (attendees.add if update["kind"] == "attend" else attendees.discard)(agent)
            self._events[event_id]["attendees"] = sorted(attendees)
        self._applied_unreported.append({"kind": update["kind"], "agent_id": agent, "event_id": event_id, "event": announced})

    async def step(self, tick: int, t: datetime) -> None:
        self.apply_pending()
        window_start = t - timedelta(seconds=tick)
        active = [e for e in self._events.values() if e["start"] < t and e["end"] > window_start]
        present = [(e["id"], a) for e in sorted(active, key=lambda e: e["id"]) for a in e["attendees"]]
        for event_id, agent in present:
            attended = self._events[event_id]["attended"]
            if agent not in attended:
                attended.append(agent)
                attended.sort()
        self._applied_last, self._present_last, self._active_last = self._applied_unreported, present, len(active)
        self._applied_unreported = []
        self.t = t

    # ---- replay and persistence --------------------------------------------------------------
    def metrics(self) -> dict[str, float]:
        kinds = [a["kind"] for a in self._applied_last]
        return {"attendance": float(len(self._present_last)), "attendees": float(len({a for _, a in self._present_last})),
                "events_active": float(self._active_last), "announced": float(kinds.count("announce")),
                "signups": float(kinds.count("attend")), "cancellations": float(kinds.count("cancel"))}

    @classmethod
    def replay_datasets(cls) -> list[DatasetSchema]:
        return [_STATE, _ATTENDANCE, _ACTIONS]

    def replay_rows(self, step: int, t: datetime) -> dict[str, list[dict[str, Any]]]:
        kinds = [a["kind"] for a in self._applied_last]
        state = {"step": step, "t": t, "events_total": len(self._events), "events_active": self._active_last,
                 "present": len(self._present_last), "announced": kinds.count("announce"),
                 "signups": kinds.count("attend"), "cancellations": kinds.count("cancel")}
        attendance = [{"step": step, "t": t, "event_id": e, "title": self._events[e]["title"], "agent_id": a}
                      for e, a in self._present_last]
        actions = [{"step": step, "t": t, **a} for a in self._applied_last]
        return {_STATE.name: [state], _ATTENDANCE.name: attendance, _ACTIONS.name: actions}

    def dump_state(self) -> dict[str, Any]:
        return {
            "events": [_jsonable(e) for e in self._events.values()],
            "applied_last": self._applied_last,
            "applied_unreported": self._applied_unreported,
            "present_last": [list(p) for p in self._present_last],
            "active_last": self._active_last,
        }

    def load_state(self, state: dict[str, Any]) -> None:
        self._events = {e["id"]: _from_jsonable(e) for e in state["events"]}
        self._applied_last = list(state["applied_last"])
        self._applied_unreported = list(state.get("applied_unreported", []))
        self._present_last = [(e, a) for e, a in state["present_last"]]
        self._active_last = state["active_last"]


def _jsonable(event: dict[str, Any]) -> dict[str, Any]:
    return {**event, "start": event["start"].isoformat(), "end": event["end"].isoformat()}


def _from_jsonable(event: dict[str, Any]) -> dict[str, Any]:
    return {**event, "start": datetime.fromisoformat(event["start"]), "end": datetime.fromisoformat(event["end"])}
