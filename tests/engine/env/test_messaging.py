"""MessagingSpace delivers at the env step, checks recipients and text, replays and persists."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pytest

from engine.env.modules.messaging import MessagingSpace
from engine.errors import ToolCallError

T0 = datetime(2024, 1, 1, 8, 0)
T1 = T0 + timedelta(minutes=15)
T2 = T1 + timedelta(minutes=15)


async def send(space: MessagingSpace, sender: int, recipient: int, content: str) -> str:
    return await space.call_tool("send_message", {"agent_id": sender, "to_agent_id": recipient, "content": content})


async def inbox(space: MessagingSpace, agent_id: int) -> str:
    return await space.call_tool("read_inbox", {"agent_id": agent_id}, readonly=True)


async def test_direct_message_arrives_only_when_the_step_runs() -> None:
    space = MessagingSpace()
    await space.init(T0)
    assert await send(space, 1, 2, "hello") == "message to agent 2 queued for delivery"

    assert await inbox(space, 2) == "Your inbox is empty."
    await space.step(900, T1)

    assert await inbox(space, 2) == "Inbox (1 messages, latest 1):\n- from agent 1: hello"
    assert await inbox(space, 1) == "Your inbox is empty."
    assert space.t == T1


async def test_reading_the_inbox_does_not_empty_it() -> None:
    space = MessagingSpace()
    await send(space, 1, 2, "first")
    await space.step(900, T1)
    first_read = await inbox(space, 2)
    assert await inbox(space, 2) == first_read
    await send(space, 3, 2, "second")
    await space.step(900, T2)
    assert await inbox(space, 2) == "Inbox (2 messages, latest 2):\n- from agent 1: first\n- from agent 3: second"


async def test_inbox_shows_only_the_latest_messages_up_to_the_limit() -> None:
    space = MessagingSpace(inbox_limit=2)
    for n in range(3):
        await send(space, 1, 2, f"m{n}")
    await space.step(900, T1)
    assert await inbox(space, 2) == "Inbox (3 messages, latest 2):\n- from agent 1: m1\n- from agent 1: m2"


async def test_group_post_reaches_other_members_but_not_the_sender() -> None:
    space = MessagingSpace(groups={"garden": [1, 2, 3]})
    result = await space.call_tool("post_to_group", {"agent_id": 1, "group": "garden", "content": "tomatoes!"})
    assert result == "post to group 'garden' queued for delivery"
    await space.step(900, T1)

    for member in (2, 3):
        assert await inbox(space, member) == "Inbox (1 messages, latest 1):\n- from agent 1 in group garden: tomatoes!"
    assert await inbox(space, 1) == "Your inbox is empty."
    assert await inbox(space, 4) == "Your inbox is empty."


async def test_posting_to_a_new_group_joins_it_at_the_end_of_the_step() -> None:
    space = MessagingSpace()
    await space.call_tool("post_to_group", {"agent_id": 5, "group": "chess", "content": "anyone?"})
    await space.call_tool("join_group", {"agent_id": 6, "group": "chess"})
    # Synchronous update: within the step everyone still reads the start-of-step state.
    assert await space.call_tool("list_groups", {"agent_id": 6}, readonly=True) == "There are no groups yet."
    await space.step(900, T1)
    assert await space.call_tool("join_group", {"agent_id": 6, "group": "chess"}) == "already a member of 'chess'"
    assert await space.call_tool("list_groups", {"agent_id": 6}, readonly=True) == "- chess: 2 members (you are a member)"
    assert await space.call_tool("list_groups", {"agent_id": 7}, readonly=True) == "- chess: 2 members"


async def test_a_step_applies_queued_updates_in_agent_order_whatever_the_call_order() -> None:
    calls = [(3, "c"), (1, "a"), (2, "b"), (1, "a2")]
    outcomes = []
    for order in (calls, list(reversed(calls))):
        space = MessagingSpace(groups={"g": [1, 2, 3, 9]})
        for agent_id, text in order:
            await space.call_tool("post_to_group", {"agent_id": agent_id, "group": "g", "content": text})
        await space.step(900, T1)
        outcomes.append(await inbox(space, 9))
    assert outcomes[0].endswith("- from agent 1 in group g: a\n- from agent 1 in group g: a2\n- from agent 2 in group g: b\n- from agent 3 in group g: c")
    # Agents are ordered by id; agent 1's own two posts keep its call order (reversed here).
    assert outcomes[1].endswith("- from agent 1 in group g: a2\n- from agent 1 in group g: a\n- from agent 2 in group g: b\n- from agent 3 in group g: c")


async def test_unknown_recipient_is_refused_once_agents_are_bound() -> None:
    space = MessagingSpace()
    space.bind_agents([1, 2])
    with pytest.raises(ToolCallError, match="there is no agent 3"):
        await send(space, 1, 3, "hi")
    with pytest.raises(ToolCallError, match="there is no agent 9"):
        await send(space, 9, 1, "hi")
    assert space.updates.all() == []


async def test_any_recipient_is_accepted_before_agents_are_bound() -> None:
    space = MessagingSpace()
    await send(space, 1, 3, "hi")
    assert len(space.updates) == 1


@pytest.mark.parametrize("content", ["", "   \n\t"])
async def test_empty_message_is_refused(content: str) -> None:
    space = MessagingSpace()
    with pytest.raises(ToolCallError, match="an empty message cannot be sent"):
        await send(space, 1, 2, content)
    assert space.updates.all() == []


async def test_oversized_message_is_refused() -> None:
    space = MessagingSpace(max_length=10)
    await send(space, 1, 2, "x" * 10)
    with pytest.raises(ToolCallError, match="message longer than 10 characters"):
        await send(space, 1, 2, "x" * 11)
    assert [m["content"] for m in space.updates.all()] == ["x" * 10]


async def test_refused_group_post_changes_no_group() -> None:
    space = MessagingSpace(max_length=5)
    with pytest.raises(ToolCallError, match="empty message"):
        await space.call_tool("post_to_group", {"agent_id": 1, "group": "new", "content": " "})
    with pytest.raises(ToolCallError, match="longer than 5"):
        await space.call_tool("post_to_group", {"agent_id": 1, "group": "new", "content": "toolong"})
    assert space.dump_state()["groups"] == {}
    assert space.updates.all() == []


async def test_replay_rows_give_one_state_row_per_step_and_one_event_per_delivered_message() -> None:
    space = MessagingSpace(groups={"g": [1, 2, 3]})
    await send(space, 1, 2, "a")
    await send(space, 2, 1, "b")
    await space.call_tool("post_to_group", {"agent_id": 3, "group": "g", "content": "c"})
    await space.step(900, T1)
    step1 = space.replay_rows(1, T1)

    assert step1["env_messaging"] == [
        {"step": 1, "t": T1, "delivered": 3, "messages_total": 2, "group_posts_total": 1, "groups": 1, "agents_with_mail": 2}
    ]
    assert step1["messages"] == [
        {"step": 1, "t": T1, "kind": "direct", "sender": 1, "recipient": 2, "group": None, "content": "a"},
        {"step": 1, "t": T1, "kind": "direct", "sender": 2, "recipient": 1, "group": None, "content": "b"},
        {"step": 1, "t": T1, "kind": "group", "sender": 3, "recipient": None, "group": "g", "content": "c"},
    ]

    await space.step(900, T2)
    step2 = space.replay_rows(2, T2)
    assert step2["env_messaging"] == [
        {"step": 2, "t": T2, "delivered": 0, "messages_total": 2, "group_posts_total": 1, "groups": 1, "agents_with_mail": 2}
    ]
    assert step2["messages"] == []


def test_replay_rows_match_the_declared_dataset_columns() -> None:
    declared = {s.name: [c.name for c in s.columns] for s in MessagingSpace.replay_datasets()}
    rows = MessagingSpace().replay_rows(1, T1)
    assert set(rows) == set(declared)
    assert list(rows["env_messaging"][0]) == declared["env_messaging"]


async def test_state_survives_to_workspace_and_from_workspace_including_pending(tmp_path: Path) -> None:
    space = MessagingSpace(groups={"g": [1, 2]})
    space.bind_workspace(tmp_path)
    await space.init(T0)
    await send(space, 1, 2, "delivered before saving")
    await space.call_tool("post_to_group", {"agent_id": 2, "group": "g", "content": "group hello"})
    await space.step(900, T1)
    await send(space, 2, 1, "still pending")
    await space.to_workspace()
    assert (tmp_path / "state" / "ENV_STATE.json").is_file()

    fresh = await MessagingSpace.from_workspace(tmp_path)
    assert isinstance(fresh, MessagingSpace)
    assert fresh.t == T1
    assert fresh.dump_state() == space.dump_state()
    assert await inbox(fresh, 2) == "Inbox (1 messages, latest 1):\n- from agent 1: delivered before saving"
    assert await fresh.call_tool("message_statistics", {}) == "1 direct messages and 1 group posts delivered; 1 groups"

    await fresh.step(900, T2)
    assert await inbox(fresh, 1) == (
        "Inbox (2 messages, latest 2):\n- from agent 2 in group g: group hello\n- from agent 2: still pending"
    )
    assert fresh.replay_rows(2, T2)["env_messaging"][0]["messages_total"] == 2


async def test_restore_without_saved_state_reports_nothing_restored(tmp_path: Path) -> None:
    space = MessagingSpace()
    assert await space.restore(tmp_path) is False
    assert await MessagingSpace().restore() is False


async def test_system_message_comes_from_the_experimenter_and_only_the_experimenter_may_send_one() -> None:
    from engine.env.base import EXPERIMENTER_ID

    space = MessagingSpace()
    space.bind_agents([1, 2])
    await space.init(T0)
    args = {"to_agent_id": 2, "content": "Please stay indoors."}
    with pytest.raises(ToolCallError, match="only the experimenter can send system messages"):
        await space.call_tool("send_system_message", {"agent_id": 1, **args})
    with pytest.raises(ToolCallError, match="there is no agent 9"):
        await space.call_tool("send_system_message", {"agent_id": EXPERIMENTER_ID, "to_agent_id": 9, "content": "x"})
    await send(space, 1, 2, "hi")
    await space.call_tool("send_system_message", {"agent_id": EXPERIMENTER_ID, **args})
    await space.step(900, T1)

    # System messages are applied first; the replay shows them with no sender.
    assert await inbox(space, 2) == (
        "Inbox (2 messages, latest 2):\n- from the experimenter (system): Please stay indoors.\n- from agent 1: hi"
    )
    events = space.replay_rows(1, T1)["messages"]
    assert [(e["kind"], e["sender"]) for e in events] == [("system", None), ("direct", 1)]


async def test_apply_pending_delivers_between_steps_and_the_next_step_reports_it() -> None:
    space = MessagingSpace()
    await space.init(T0)
    await send(space, 1, 2, "between ticks")

    assert space.apply_pending() == 1
    assert await inbox(space, 2) == "Inbox (1 messages, latest 1):\n- from agent 1: between ticks"
    assert space.apply_pending() == 0
    await send(space, 3, 2, "in the tick")
    await space.step(900, T1)

    events = space.replay_rows(1, T1)["messages"]
    assert [e["content"] for e in events] == ["between ticks", "in the tick"]
    assert space.replay_rows(1, T1)["env_messaging"][0]["delivered"] == 2
    await space.step(900, T2)
    assert space.replay_rows(2, T2)["messages"] == []


async def test_delivered_but_unreported_messages_survive_a_restore() -> None:
    space = MessagingSpace()
    await space.init(T0)
    await send(space, 1, 2, "settled")
    space.apply_pending()
    restored = MessagingSpace()
    restored.load_state(space.dump_state())
    await restored.step(900, T1)
    assert [e["content"] for e in restored.replay_rows(1, T1)["messages"]] == ["settled"]
