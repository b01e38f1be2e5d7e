"""MessagingSpace's declared names, and SimpleSocialSpace's reference tools: receive_messages, group tools."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from engine.env.modules.messaging import MessagingSpace
from engine.env.modules.simple_social import SimpleSocialSpace
from engine.errors import SpecError, ToolCallError

T0 = datetime(2024, 1, 1, 8, 0)
T1, T2 = T0 + timedelta(minutes=15), T0 + timedelta(minutes=30)
PAIRS = [[1, "Alice"], [2, "Bob"], [3, "Chen"]]


async def _space(**kwargs) -> SimpleSocialSpace:
    space = SimpleSocialSpace(agent_id_name_pairs=PAIRS, **kwargs)
    await space.init(T0)
    space.bind_agents([1, 2, 3])
    return space


async def test_messages_and_receipts_show_agents_by_their_declared_names() -> None:
    space = await _space()
    sent = await space.call_tool("send_message", {"agent_id": 1, "to_agent_id": 2, "content": "tea at 5?"})
    assert sent == "message to Bob (agent 2) queued for delivery"
    await space.step(900, T1)
    inbox = await space.call_tool("read_inbox", {"agent_id": 2}, readonly=True)
    assert inbox == "Inbox (1 messages, latest 1):\n- from Alice (agent 1): tea at 5?"
    unnamed = MessagingSpace()
    await unnamed.init(T0)
    assert await unnamed.call_tool("send_message", {"agent_id": 1, "to_agent_id": 2, "content": "hi"}) == (
        "message to agent 2 queued for delivery")


def test_a_name_declared_twice_is_refused() -> None:
    with pytest.raises(SpecError, match="agent 3 or name 'Bob' appears twice"):
        MessagingSpace(agent_id_name_pairs=[[2, "Bob"], [3, "Bob"]])


async def test_receive_messages_hands_each_message_over_once_from_the_next_step() -> None:
    space = await _space()
    await space.call_tool("send_message", {"agent_id": 1, "to_agent_id": 3, "content": "one"})
    await space.step(900, T1)
    first = await space.call_tool("receive_messages", {"agent_id": 3})
    assert first == "1 new messages:\n- from Alice (agent 1): one"
    # Within the step the mailbox is unchanged (every agent of a tick reads the start-of-tick state) ...
    assert await space.call_tool("receive_messages", {"agent_id": 3}) == first
    await space.call_tool("send_message", {"agent_id": 2, "to_agent_id": 3, "content": "two"})
    await space.step(900, T2)
    # ... and from the next step only what arrived since is new; the inbox keeps the history.
    assert await space.call_tool("receive_messages", {"agent_id": 3}) == "1 new messages:\n- from Bob (agent 2): two"
    assert (await space.call_tool("read_inbox", {"agent_id": 3}, readonly=True)).startswith("Inbox (2 messages")
    restored = SimpleSocialSpace(agent_id_name_pairs=PAIRS)
    restored.load_state(space.dump_state())
    assert await restored.call_tool("receive_messages", {"agent_id": 3}) == "1 new messages:\n- from Bob (agent 2): two"


async def test_create_group_send_group_message_and_leave_group() -> None:
    space = await _space()
    assert await space.call_tool("create_group", {"agent_id": 1, "group": "club", "member_ids": [2]}) == (
        "group 'club' will exist from the next step")
    await space.step(900, T1)
    with pytest.raises(ToolCallError, match="already exists"):
        await space.call_tool("create_group", {"agent_id": 3, "group": "club"})
    await space.call_tool("send_group_message", {"agent_id": 1, "group": "club", "content": "hello club"})
    await space.call_tool("leave_group", {"agent_id": 2, "group": "club"})
    await space.step(900, T2)
    # Updates apply in agent order: Bob gets Alice's post, then leaves.
    assert await space.call_tool("receive_messages", {"agent_id": 2}) == (
        "1 new messages:\n- from Alice (agent 1) in group club: hello club")
    assert await space.call_tool("list_groups", {"agent_id": 2}, readonly=True) == "- club: 1 members"


def test_simple_social_space_has_the_reference_tools_and_messaging_space_keeps_its_own() -> None:
    reference = {"send_message", "receive_messages", "create_group", "join_group", "leave_group", "send_group_message"}
    assert reference <= set(SimpleSocialSpace.tools())
    assert set(SimpleSocialSpace.tools()) == set(MessagingSpace.tools()) | reference
    assert (reference - {"send_message", "join_group"}) & set(MessagingSpace.tools()) == set()
