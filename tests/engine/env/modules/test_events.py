"""EventSpace lists relevant events, applies announcements and sign-ups at the step, counts attendance, replays and persists."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.env.modules.events import EventSpace
from engine.errors import SpecError, ToolCallError

T0 = datetime(2024, 1, 1, 8, 0)
HOUR = 3600
EVENTS = [
    {"title": "Breakfast club", "start": "2024-01-01T07:00", "end": "2024-01-01T08:00"},
    {"title": "Market", "start": "2024-01-01T09:00", "end": "2024-01-01T11:00", "location": "Town square",
     "description": "Local farmers sell produce."},
    {"title": "Concert", "start": "2024-01-02T20:00", "end": "2024-01-02T22:00"},
]


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


async def call(space: EventSpace, tool: str, **args: Any) -> Any:
    return await space.call_tool(tool, args)


async def upcoming(space: EventSpace, agent_id: int) -> str:
    return await space.call_tool("upcoming_events", {"agent_id": agent_id}, readonly=True)


async def calendar(**kwargs: Any) -> EventSpace:
    space = EventSpace(events=EVENTS, **kwargs)
    await space.init(T0)
    return space


async def test_upcoming_events_show_what_is_on_now_and_within_the_horizon() -> None:
    space = await calendar()
    assert await upcoming(space, 1) == (
        "Events now and coming up (1):\n"
        "- event 2: Market at Town square, 2024-01-01 09:00 to 2024-01-01 11:00; 0 signed up"
    )
    space.set_current_time(at(1.5))
    assert "(under way)" in await upcoming(space, 1)
    space.set_current_time(at(13))  # Market over; the concert is now within 24 hours
    assert await upcoming(space, 1) == (
        "Events now and coming up (1):\n- event 3: Concert, 2024-01-02 20:00 to 2024-01-02 22:00; 0 signed up"
    )
    space.set_current_time(at(40))
    assert await upcoming(space, 1) == "No events are under way or coming up."


async def test_a_sign_up_counts_as_presence_in_every_step_the_event_overlaps() -> None:
    space = await calendar()
    assert await call(space, "attend", agent_id=1, event_id=2) == "you are signed up for event 2 (Market) from the end of this step"
    assert await call(space, "attend", agent_id=1, event_id=2) == "you are already signed up for event 2"
    assert "0 signed up" in await upcoming(space, 1)

    present = []
    for hour in (1, 2, 3, 4):
        await space.step(HOUR, at(hour))
        present.append([(r["event_id"], r["agent_id"]) for r in space.replay_rows(hour, at(hour))["events_attendance"]])
    # 08-09 precedes the market (09-11), 09-10 and 10-11 overlap it, 11-12 follows it.
    assert present == [[], [(2, 1)], [(2, 1)], []]
    assert await call(space, "event_details", agent_id=1, event_id=2) == (
        "- event 2: Market at Town square, 2024-01-01 09:00 to 2024-01-01 11:00; 1 signed up, you are signed up\n"
        "scheduled; 1 agents have attended so far.\nLocal farmers sell produce."
    )


async def test_cancelling_a_sign_up_stops_presence_from_that_step() -> None:
    space = await calendar()
    await call(space, "attend", agent_id=1, event_id=2)
    await call(space, "attend", agent_id=2, event_id=2)
    await space.step(HOUR, at(1))
    await space.step(HOUR, at(2))
    assert await call(space, "cancel_attendance", agent_id=1, event_id=2) == (
        "your sign-up for event 2 will be withdrawn at the end of this step"
    )
    assert await call(space, "cancel_attendance", agent_id=1, event_id=2) == "you are not signed up for event 2"
    assert await call(space, "attend", agent_id=1, event_id=2) == "you are signed up for event 2 (Market) from the end of this step"
    assert await call(space, "cancel_attendance", agent_id=1, event_id=2) == (
        "your sign-up for event 2 will be withdrawn at the end of this step"
    )
    await space.step(HOUR, at(3))
    assert [r["agent_id"] for r in space.replay_rows(3, at(3))["events_attendance"]] == [2]
    assert await call(space, "event_statistics") == "3 events; 1 ran during the last step with 1 agents present; 2 distinct attendances in all"


async def test_an_announced_event_is_listed_from_the_end_of_the_step() -> None:
    space = await calendar()
    result = await call(space, "announce_event", agent_id=5, title="Book swap", start="2024-01-01T18:00+01:00",
                        end="2024-01-01T19:30+01:00", location="Library")
    assert result == "event 'Book swap' will be announced at the end of this step"
    assert "Book swap" not in await upcoming(space, 1)
    await space.step(HOUR, at(1))
    # Times with an offset are stored as naive UTC, like the simulation clock.
    assert await upcoming(space, 1) == (
        "Events now and coming up (2):\n"
        "- event 2: Market at Town square, 2024-01-01 09:00 to 2024-01-01 11:00 (under way); 0 signed up\n"
        "- event 4: Book swap at Library, 2024-01-01 17:00 to 2024-01-01 18:30; 0 signed up"
    )
    assert (await call(space, "event_details", agent_id=1, event_id=4)).endswith("announced by agent 5; 0 agents have attended so far.")


async def test_refusals_are_clear_tool_call_errors() -> None:
    space = await calendar(max_length=30)
    space.bind_agents([1, 2])
    space.set_current_time(at(4))
    cases = [
        ("attend", {"agent_id": 1, "event_id": 9}, "there is no event 9"),
        ("attend", {"agent_id": 1, "event_id": 2}, r"event 2 \(Market\) has already ended"),
        ("attend", {"agent_id": 7, "event_id": 3}, "there is no agent 7"),
        ("attend", {"agent_id": 1, "event_id": "two"}, "bad arguments for EventSpace.attend"),
        ("cancel_attendance", {"agent_id": 1, "event_id": 9}, "there is no event 9"),
        ("event_details", {"agent_id": 1, "event_id": 0}, "there is no event 0"),
        ("announce_event", {"agent_id": 1, "title": "x", "start": "tomorrow", "end": "2024-01-02T10:00"},
         "start must be an ISO time such as 2024-01-01T18:00, got 'tomorrow'"),
        ("announce_event", {"agent_id": 1, "title": "x", "start": "2024-01-02T10:00", "end": "2024-01-02T09:00"},
         "the event must end after it starts"),
        ("announce_event", {"agent_id": 1, "title": "x", "start": "2024-01-01T09:00", "end": "2024-01-01T10:00"},
         "the event would already be over"),
        ("announce_event", {"agent_id": 1, "title": "  ", "start": "2024-01-02T09:00", "end": "2024-01-02T10:00"},
         "an event needs a title"),
        ("announce_event", {"agent_id": 1, "title": "x" * 31, "start": "2024-01-02T09:00", "end": "2024-01-02T10:00"},
         "text longer than 30 characters"),
        ("announce_event", {"agent_id": 1, "title": "x", "start": "2024-01-02T09:00"}, "bad arguments.*Field required"),
    ]
    for tool, args, message in cases:
        with pytest.raises(ToolCallError, match=message):
            await space.call_tool(tool, args)
    assert space.updates.all() == []


@pytest.mark.parametrize(
    ("events", "message"),
    [
        ([{"title": "x", "start": "noon", "end": "2024-01-01T13:00"}], r"events\[0\]: start must be an ISO time"),
        ([{"start": "2024-01-01T12:00", "end": "2024-01-01T13:00"}], r"events\[0\]: an event needs a title"),
        ([{"title": "x", "start": "2024-01-01T12:00", "end": "2024-01-01T12:00"}], "must end after it starts"),
        (["Market at noon"], r"events\[0\]"),
    ],
)
def test_bad_scheduled_events_are_spec_errors(events: list[Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        EventSpace(events=events)


def test_scheduled_events_may_hold_datetimes_as_yaml_gives_them() -> None:
    space = EventSpace(events=[{"title": "Fair", "start": at(1), "end": at(3)}])
    assert space.dump_state()["events"][0]["start"] == "2024-01-01T09:00:00"


async def test_a_step_applies_queued_actions_in_agent_order_whatever_the_call_order() -> None:
    calls = [
        ("announce_event", {"agent_id": 3, "title": "Picnic", "start": "2024-01-01T12:00", "end": "2024-01-01T14:00"}),
        ("attend", {"agent_id": 2, "event_id": 2}),
        ("announce_event", {"agent_id": 1, "title": "Run", "start": "2024-01-01T08:30", "end": "2024-01-01T09:30"}),
        ("cancel_attendance", {"agent_id": 2, "event_id": 2}),
        ("attend", {"agent_id": 1, "event_id": 2}),
    ]
    states, rows = [], []
    for order in (calls, sorted(calls, key=lambda c: -c[1]["agent_id"])):
        space = await calendar()
        for tool, args in order:
            await space.call_tool(tool, args)
        await space.step(HOUR, at(1))
        states.append(space.dump_state())
        rows.append(space.replay_rows(1, at(1)))
    assert states[0] == states[1]
    assert rows[0] == rows[1]
    assert [(a["kind"], a["agent_id"], a["event_id"]) for a in rows[0]["events_actions"]] == [
        ("announce", 1, 4), ("attend", 1, 2), ("attend", 2, 2), ("cancel", 2, 2), ("announce", 3, 5),
    ]
    assert [e["title"] for e in states[0]["events"]][3:] == ["Run", "Picnic"]


async def test_replay_rows_give_one_state_row_per_step_with_attendance_and_actions() -> None:
    space = await calendar()
    await call(space, "attend", agent_id=1, event_id=2)
    await call(space, "announce_event", agent_id=2, title="Quiz", start="2024-01-01T08:30", end="2024-01-01T09:30")
    await space.step(HOUR, at(1))
    step1 = space.replay_rows(1, at(1))
    assert step1["events_state"] == [{"step": 1, "t": at(1), "events_total": 4, "events_active": 1, "present": 0,
                                      "announced": 1, "signups": 1, "cancellations": 0}]
    assert step1["events_attendance"] == []
    assert step1["events_actions"][1] == {
        "step": 1, "t": at(1), "kind": "announce", "agent_id": 2, "event_id": 4,
        "event": {"title": "Quiz", "start": "2024-01-01T08:30:00", "end": "2024-01-01T09:30:00", "location": "",
                  "description": "", "organizer": 2},
    }
    await call(space, "attend", agent_id=3, event_id=4)
    await space.step(HOUR, at(2))
    step2 = space.replay_rows(2, at(2))
    assert step2["events_state"][0]["events_active"] == 2
    assert step2["events_attendance"] == [
        {"step": 2, "t": at(2), "event_id": 2, "title": "Market", "agent_id": 1},
        {"step": 2, "t": at(2), "event_id": 4, "title": "Quiz", "agent_id": 3},
    ]

    schemas = {s.name: s for s in EventSpace.replay_datasets()}
    assert all(name.startswith("events_") for name in schemas) and set(step1) == set(schemas)
    for rows in (step1, step2):
        for name, schema in schemas.items():
            assert all(list(row) == [c.name for c in schema.columns] for row in rows[name])
            assert schema.to_table(rows[name]).num_rows == len(rows[name])


async def test_state_survives_to_workspace_and_from_workspace_including_queued_actions(tmp_path: Path) -> None:
    space = await calendar(horizon_hours=48)
    space.bind_workspace(tmp_path)
    await call(space, "attend", agent_id=1, event_id=2)
    await space.step(HOUR, at(1))
    await call(space, "announce_event", agent_id=2, title="Quiz", start="2024-01-01T09:30", end="2024-01-01T10:30")
    await call(space, "attend", agent_id=3, event_id=3)
    await space.to_workspace()

    fresh = await EventSpace.from_workspace(tmp_path, horizon_hours=48)
    assert isinstance(fresh, EventSpace)
    assert fresh.t == at(1)
    assert fresh.dump_state() == space.dump_state()
    assert await upcoming(fresh, 1) == await upcoming(space, 1)
    assert await call(fresh, "attend", agent_id=3, event_id=3) == "you are already signed up for event 3"

    await fresh.step(HOUR, at(2))
    await space.step(HOUR, at(2))
    assert fresh.dump_state() == space.dump_state()
    assert fresh.replay_rows(2, at(2)) == space.replay_rows(2, at(2))
    assert "event 4: Quiz" in await upcoming(fresh, 1)
