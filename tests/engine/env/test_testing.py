"""engine.env.testing: every built-in module keeps the update discipline, and the checker catches plugins that do not."""

from __future__ import annotations

import pytest

from engine.env.base import EXPERIMENTER_ID
from engine.env.modules import (
    EconomySpace,
    EventSpace,
    GlobalInformationSpace,
    MessagingSpace,
    MobilitySpace,
    PrisonersDilemmaGame,
    PublicGoodsGame,
    SocialMediaSpace,
    TrustGame,
)
from engine.env.testing import ToolCall, UpdateDisciplineError, check_update_discipline
from tests.engine.env.plugin_modules import EagerTallySpace, ForgetfulStepTallySpace, TallySpace

AGENTS = [1, 2, 3, 4]
_FAR = MobilitySpace().city.regions()[-1].id

BUILTIN = {
    "messaging": (lambda: MessagingSpace(groups={"club": [1, 2]}), [
        ToolCall(1, "send_message", {"to_agent_id": 2, "content": "hi"}),
        ToolCall(2, "post_to_group", {"group": "club", "content": "meet at 5"}),
        ToolCall(3, "join_group", {"group": "club"}),
        ToolCall(EXPERIMENTER_ID, "send_system_message", {"to_agent_id": 3, "content": "welcome"}),
        ToolCall(1, "read_inbox"),
        ToolCall(1, "send_message", {"to_agent_id": 99, "content": "refused"}),
    ]),
    "global_info": (lambda: GlobalInformationSpace(facts=["the bridge is closed"]), [
        ToolCall(2, "broadcast", {"text": "the market opens at 9"}),
        ToolCall(1, "broadcast", {"text": "rain tomorrow"}),
        ToolCall(1, "latest_news"),
    ]),
    "economy": (lambda: EconomySpace(accounts={1: 100.0, 2: 50.0}, goods={"bread": 2.5}, price_adjustment=0.1, interest_rate=0.01), [
        ToolCall(1, "work", {"hours": 2}),
        ToolCall(1, "buy", {"good": "bread", "quantity": 3}),
        ToolCall(2, "transfer", {"to_agent_id": 1, "amount": 10}),
        ToolCall(1, "deposit", {"amount": 20}),
        ToolCall(2, "buy", {"good": "bread", "quantity": 1000}),  # refused: cannot afford
        ToolCall(2, "my_account"),
    ]),
    "events": (lambda: EventSpace(events=[{"title": "fair", "start": "2026-01-01T07:00", "end": "2026-01-01T12:00"}]), [
        ToolCall(1, "announce_event", {"title": "picnic", "start": "2026-01-01T10:00", "end": "2026-01-01T11:00"}),
        ToolCall(2, "attend", {"event_id": 1}),
        ToolCall(3, "attend", {"event_id": 1}),
        ToolCall(3, "cancel_attendance", {"event_id": 1}),
        ToolCall(1, "upcoming_events"),
    ]),
    "social_media": (SocialMediaSpace, [
        ToolCall(2, "create_post", {"text": "second author"}),
        ToolCall(1, "create_post", {"text": "hello world"}),
        ToolCall(3, "follow", {"target_agent_id": 1}),
        ToolCall(3, "unfollow", {"target_agent_id": 1}),
        ToolCall(4, "follow", {"target_agent_id": 2}),
        ToolCall(4, "my_feed"),
    ]),
    "mobility": (MobilitySpace, [
        ToolCall(1, "move_to", {"destination": _FAR}),
        ToolCall(2, "move_to", {"destination": _FAR}),
        ToolCall(1, "move_to", {"destination": "home"}),  # refused: already set off
        ToolCall(1, "where_am_i"),
    ]),
    "prisoners_dilemma": (PrisonersDilemmaGame, [
        ToolCall(1, "play", {"move": "cooperate"}),
        ToolCall(2, "play", {"move": "defect"}),
        ToolCall(1, "play", {"move": "defect"}),  # refused: one move per round
        ToolCall(3, "prisoners_dilemma_status"),
    ]),
    "public_goods": (lambda: PublicGoodsGame(group_size=2), [
        ToolCall(1, "contribute", {"amount": 4}),
        ToolCall(2, "contribute", {"amount": 10}),
        ToolCall(3, "contribute", {"amount": 0}),
    ]),
    "trust_game": (TrustGame, [
        ToolCall(1, "invest", {"amount": 5}),
        ToolCall(3, "invest", {"amount": 10}),
        ToolCall(2, "return_tokens", {"amount": 1}),  # refused: nothing received yet
    ]),
}


@pytest.mark.parametrize("name", sorted(BUILTIN))
async def test_every_builtin_module_keeps_the_update_discipline(name: str) -> None:
    make, calls = BUILTIN[name]
    await check_update_discipline(make, calls, agent_ids=AGENTS)


async def test_a_plugin_that_only_queues_and_applies_its_updates_keeps_the_discipline() -> None:
    await check_update_discipline(TallySpace, [ToolCall(1, "add", {"points": 3}), ToolCall(2, "add", {"points": 1}),
                                               ToolCall(1, "add", {"points": 2})], agent_ids=AGENTS)


async def test_a_tool_that_changes_state_during_the_agent_phase_is_caught() -> None:
    with pytest.raises(UpdateDisciplineError, match="EagerTallySpace: add changed the state during the agent phase"):
        await check_update_discipline(EagerTallySpace, [ToolCall(1, "add", {"points": 3})], agent_ids=AGENTS)


async def test_a_step_override_that_never_applies_the_queue_is_caught() -> None:
    with pytest.raises(UpdateDisciplineError, match="step left 1 updates queued"):
        await check_update_discipline(ForgetfulStepTallySpace, [ToolCall(1, "add", {"points": 3})], agent_ids=AGENTS)


async def test_calls_that_queue_nothing_do_not_pass_as_a_check() -> None:
    with pytest.raises(UpdateDisciplineError, match="queued no update"):
        await check_update_discipline(TallySpace, [ToolCall(1, "tally")], agent_ids=AGENTS)
