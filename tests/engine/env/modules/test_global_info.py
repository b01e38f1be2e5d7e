"""GlobalInformationSpace releases facts on time, publishes broadcasts at the step, searches, replays and persists."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.env.modules.global_info import GlobalInformationSpace
from engine.errors import SpecError, ToolCallError

T0 = datetime(2024, 1, 1, 8, 0)
HOUR = 3600
FACTS: list[Any] = [
    "A storm is expected tonight.",
    {"text": "The bridge is closed for repairs.", "source": "city council"},
    {"text": "Election results: the Greens won.", "source": "TV", "time": "2024-01-01T10:00"},
]


def at(hours: float) -> datetime:
    return T0 + timedelta(hours=hours)


async def news(space: GlobalInformationSpace, agent_id: int = 1) -> str:
    return await space.call_tool("latest_news", {"agent_id": agent_id}, readonly=True)


async def broadcast(space: GlobalInformationSpace, agent_id: int, text: str) -> str:
    return await space.call_tool("broadcast", {"agent_id": agent_id, "text": text})


async def world(**kwargs: Any) -> GlobalInformationSpace:
    space = GlobalInformationSpace(facts=FACTS, **kwargs)
    await space.init(T0)
    return space


async def test_initial_facts_are_public_from_the_start_and_dated_ones_when_their_time_comes() -> None:
    space = await world()
    assert await news(space) == (
        "Latest news (2 of 2):\n"
        "- [2024-01-01 08:00, from city council] The bridge is closed for repairs.\n"
        "- [2024-01-01 08:00, from world] A storm is expected tonight."
    )
    await space.step(HOUR, at(1))
    assert "Election" not in await news(space)
    await space.step(HOUR, at(2))
    assert (await news(space)).splitlines()[:2] == [
        "Latest news (3 of 3):", "- [2024-01-01 10:00, from TV] Election results: the Greens won.",
    ]


async def test_a_broadcast_is_public_from_the_next_step_with_its_sender_as_source() -> None:
    space = await world()
    assert await broadcast(space, 4, "  Free concert in the park!  ") == "broadcast queued; everyone can read it from the next step"
    assert "concert" not in await news(space, 4)
    await space.step(HOUR, at(1))
    assert (await news(space, 9)).splitlines()[1] == "- [2024-01-01 09:00, from agent 4] Free concert in the park!"


async def test_latest_news_shows_only_the_newest_up_to_the_limit() -> None:
    space = await world(news_limit=2)
    await broadcast(space, 1, "one")
    await space.step(HOUR, at(1))
    await broadcast(space, 1, "two")
    await space.step(HOUR, at(2))
    assert await news(space) == (
        "Latest news (2 of 5):\n"
        "- [2024-01-01 10:00, from agent 1] two\n"
        "- [2024-01-01 10:00, from TV] Election results: the Greens won."
    )


async def test_search_ranks_facts_by_matching_words_then_recency() -> None:
    space = await world()
    await broadcast(space, 2, "The storm closed the bridge")
    await space.step(HOUR, at(1))
    result = await space.call_tool("search_news", {"agent_id": 1, "query": "storm BRIDGE"})
    assert result == (
        "3 facts match 'storm BRIDGE':\n"
        "- [2024-01-01 09:00, from agent 2] The storm closed the bridge\n"
        "- [2024-01-01 08:00, from city council] The bridge is closed for repairs.\n"
        "- [2024-01-01 08:00, from world] A storm is expected tonight."
    )
    # A fact not yet released cannot be found.
    assert await space.call_tool("search_news", {"agent_id": 1, "query": "election"}) == "No news matches 'election'."
    assert (await space.call_tool("search_news", {"agent_id": 1, "query": "storm", "limit": 1})).count("\n") == 1


async def test_statistics_count_public_broadcast_and_scheduled_facts() -> None:
    space = await world()
    await broadcast(space, 2, "hello")
    await space.step(HOUR, at(1))
    assert await space.call_tool("news_statistics", {}) == "3 public facts (1 broadcast by agents); 1 scheduled for later"


async def test_refusals_are_clear_tool_call_errors() -> None:
    space = await world(max_length=10)
    space.bind_agents([1, 2])
    cases = [
        ("broadcast", {"agent_id": 1, "text": " \n "}, "an empty broadcast cannot be sent"),
        ("broadcast", {"agent_id": 1, "text": "x" * 11}, "broadcast longer than 10 characters"),
        ("broadcast", {"agent_id": 3, "text": "hi"}, "there is no agent 3"),
        ("broadcast", {"agent_id": 1}, "bad arguments for GlobalInformationSpace.broadcast: Field required"),
        ("broadcast", {"agent_id": 1, "text": "hi", "priority": 1}, "bad arguments.*Extra inputs are not permitted"),
        ("search_news", {"agent_id": 1, "query": "..."}, "the search query has no words"),
        ("search_news", {"agent_id": 1, "query": "storm", "limit": 0}, "limit must be at least 1"),
    ]
    for tool, args, message in cases:
        with pytest.raises(ToolCallError, match=message):
            await space.call_tool(tool, args)
    assert space.updates.all() == []


@pytest.mark.parametrize(
    ("facts", "message"),
    [
        ([""], r"facts\[0\]: a fact needs a non-empty text"),
        ([{"source": "TV"}], r"facts\[0\]: a fact needs a non-empty text"),
        ([{"text": "x", "time": "at noon"}], r"facts\[0\]: time must be an ISO time"),
        ([42], r"facts\[0\]"),
    ],
)
def test_bad_initial_facts_are_spec_errors(facts: list[Any], message: str) -> None:
    with pytest.raises(SpecError, match=message):
        GlobalInformationSpace(facts=facts)


async def test_a_step_publishes_broadcasts_in_agent_order_whatever_the_call_order() -> None:
    calls = [(3, "c"), (1, "a"), (2, "b"), (1, "a2")]
    states, rows = [], []
    for order in (calls, sorted(calls, key=lambda c: -c[0])):
        space = await world()
        for agent_id, text in order:
            await broadcast(space, agent_id, text)
        await space.step(HOUR, at(1))
        states.append(space.dump_state())
        rows.append(space.replay_rows(1, at(1)))
    assert states[0] == states[1]
    assert rows[0] == rows[1]
    assert [(r["fact_id"], r["text"]) for r in rows[0]["global_info_facts"]][2:] == [(4, "a"), (5, "a2"), (6, "b"), (7, "c")]


async def test_replay_rows_give_one_state_row_per_step_and_the_facts_published_in_it() -> None:
    space = await world()
    await broadcast(space, 5, "news!")
    await space.step(HOUR, at(1))
    step1 = space.replay_rows(1, at(1))
    assert step1["global_info_state"] == [
        {"step": 1, "t": at(1), "published": 3, "facts_total": 3, "broadcasts_total": 1, "scheduled": 1}
    ]
    assert step1["global_info_facts"] == [
        {"step": 1, "t": at(1), "fact_id": 1, "time": T0, "source": "world", "agent_id": None, "text": "A storm is expected tonight."},
        {"step": 1, "t": at(1), "fact_id": 2, "time": T0, "source": "city council", "agent_id": None,
         "text": "The bridge is closed for repairs."},
        {"step": 1, "t": at(1), "fact_id": 4, "time": at(1), "source": "agent 5", "agent_id": 5, "text": "news!"},
    ]
    await space.step(HOUR, at(2))
    step2 = space.replay_rows(2, at(2))
    assert step2["global_info_state"] == [
        {"step": 2, "t": at(2), "published": 1, "facts_total": 4, "broadcasts_total": 1, "scheduled": 0}
    ]
    assert [r["fact_id"] for r in step2["global_info_facts"]] == [3]
    await space.step(HOUR, at(3))
    assert space.replay_rows(3, at(3))["global_info_facts"] == []

    schemas = {s.name: s for s in GlobalInformationSpace.replay_datasets()}
    assert all(name.startswith("global_info_") for name in schemas) and set(step1) == set(schemas)
    for name, schema in schemas.items():
        assert all(list(row) == [c.name for c in schema.columns] for row in step1[name])
        assert schema.to_table(step1[name]).num_rows == len(step1[name])


async def test_state_survives_to_workspace_and_from_workspace_including_queued_broadcasts(tmp_path: Path) -> None:
    space = await world(news_limit=10)
    space.bind_workspace(tmp_path)
    await broadcast(space, 1, "published before saving")
    await space.step(HOUR, at(1))
    await broadcast(space, 2, "still queued")
    await space.to_workspace()

    fresh = await GlobalInformationSpace.from_workspace(tmp_path, facts=FACTS, news_limit=10)
    assert isinstance(fresh, GlobalInformationSpace)
    assert fresh.t == at(1)
    assert fresh.dump_state() == space.dump_state()
    assert await news(fresh) == await news(space)

    await fresh.step(HOUR, at(2))
    await space.step(HOUR, at(2))
    assert fresh.dump_state() == space.dump_state()
    assert fresh.replay_rows(2, at(2)) == space.replay_rows(2, at(2))
    assert "- [2024-01-01 10:00, from agent 2] still queued" in await news(fresh)


async def test_apply_pending_publishes_a_broadcast_between_steps_at_the_current_time() -> None:
    space = GlobalInformationSpace()
    await space.init(T0)
    await space.step(HOUR, at(1))
    await space.call_tool("broadcast", {"agent_id": 4, "text": "Free concert in the park."})

    assert space.apply_pending() == 1
    assert await news(space) == "Latest news (1 of 1):\n- [2024-01-01 09:00, from agent 4] Free concert in the park."
    await space.step(HOUR, at(2))
    published = space.replay_rows(2, at(2))["global_info_facts"]
    assert [(f["text"], f["time"]) for f in published] == [("Free concert in the park.", at(1))]
