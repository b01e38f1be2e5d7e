"""A re-run agent-step must not queue its updates twice: modules drop what one agent queued this tick."""

from __future__ import annotations

from datetime import datetime, timedelta

from engine.env.modules.economy import EconomySpace
from engine.env.modules.messaging import MessagingSpace
from engine.env.modules.social_media import SocialMediaSpace

T0 = datetime(2026, 1, 1, 8, 0)
T1 = T0 + timedelta(hours=1)


async def test_messaging_drops_only_the_discarded_senders_messages() -> None:
    space = MessagingSpace()
    await space.init(T0)
    space.bind_agents([1, 2, 3])
    await space.call_tool("send_message", {"agent_id": 1, "to_agent_id": 3, "content": "first try"})
    await space.call_tool("send_message", {"agent_id": 2, "to_agent_id": 3, "content": "from two"})
    assert space.discard_pending(1) == 1
    assert space.discard_pending(1) == 0
    await space.call_tool("send_message", {"agent_id": 1, "to_agent_id": 3, "content": "second try"})
    await space.step(3600, T1)
    inbox = await space.call_tool("read_inbox", {"agent_id": 3}, readonly=True)
    assert "second try" in inbox and "from two" in inbox and "first try" not in inbox


async def test_economy_forgets_the_discarded_agents_spending_and_its_available_cash() -> None:
    space = EconomySpace(accounts={1: 100.0, 2: 50.0}, goods={"bread": 2.5})
    await space.init(T0)
    await space.call_tool("buy", {"agent_id": 1, "good": "bread", "quantity": 30})
    await space.call_tool("buy", {"agent_id": 2, "good": "bread", "quantity": 2})
    assert space.discard_pending(1) == 1
    # The re-run step sees its whole balance again, as the first attempt did.
    assert "($100.00 available this step)" in await space.call_tool("my_account", {"agent_id": 1}, readonly=True)
    await space.step(3600, T1)
    accounts = space.dump_state()["accounts"]
    assert accounts["1"]["cash"] == 100.0 and accounts["2"]["cash"] == 45.0


async def test_social_media_drops_a_discarded_post_and_its_like() -> None:
    space = SocialMediaSpace()
    await space.init(T0)
    space.bind_agents([1, 2])
    await space.call_tool("create_post", {"agent_id": 1, "text": "hello"})
    await space.call_tool("create_post", {"agent_id": 2, "text": "kept"})
    assert space.discard_pending(1) == 1
    await space.step(3600, T1)
    posts = space.dump_state()["posts"]
    assert [p["text"] for p in (posts.values() if isinstance(posts, dict) else posts)] == ["kept"]
