"""PersonEconomySpace: the reference EconomySpace's per-person tools over our EconomySpace, queued and snapshotted."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from engine.env.modules.economy import EconomySpace
from engine.env.modules.reference_economy import PersonEconomySpace
from engine.env.testing import ToolCall, check_update_discipline
from engine.errors import SpecError, ToolCallError

T0 = datetime(2024, 1, 1, 8, 0)
T1 = T0 + timedelta(hours=1)
PEOPLE = [{"id": 1, "currency": 40.0, "skill": 2.5, "income": 30.0}, {"id": 2}]


async def _economy(**kwargs) -> PersonEconomySpace:
    space = PersonEconomySpace(people=PEOPLE, **kwargs)
    await space.init(T0)
    space.bind_agents([1, 2, 3])
    return space


async def test_people_set_the_opening_records_and_get_person_shows_them() -> None:
    space = await _economy(default_balance=10.0)
    assert await space.call_tool("get_person", {"agent_id": 1}, readonly=True) == (
        "Your economic record: currency $40.00 ($40.00 available this step); skill 2.5; consumption $0.00; income $30.00.")
    assert await space.call_tool("get_currency", {"agent_id": 2}, readonly=True) == "Your currency $10.00 ($10.00 available this step)."
    assert await space.call_tool("get_skill", {"agent_id": 3}, readonly=True) == "Your skill is 0."  # bound, not in people
    assert "Cash $40.00" in await space.call_tool("my_account", {"agent_id": 1}, readonly=True)


async def test_currency_changes_settle_at_the_step_and_cannot_overdraw() -> None:
    space = await _economy()
    assert await space.call_tool("add_currency", {"agent_id": 1, "amount": -15}) == "currency change of -15.00 queued for the end of this step"
    await space.call_tool("add_currency", {"agent_id": 1, "amount": 100})
    # The taken amount is spoken for at once; the added one only counts from the next step.
    assert await space.call_tool("get_currency", {"agent_id": 1}, readonly=True) == (
        "Your currency $40.00 ($25.00 available this step; +$100.00 arrives at the end of this step).")
    with pytest.raises(ToolCallError, match=r"cannot afford taking currency away for \$30.00: you have \$25.00"):
        await space.call_tool("add_currency", {"agent_id": 1, "amount": -30})
    with pytest.raises(ToolCallError, match=r"cannot afford 11 food"):  # buy sees the queued outflow too
        await space.call_tool("buy", {"agent_id": 1, "good": "food", "quantity": 11})
    with pytest.raises(ToolCallError, match="at least \\$0.01"):
        await space.call_tool("add_currency", {"agent_id": 1, "amount": 0.001})
    await space.step(3600, T1)
    assert await space.call_tool("get_currency", {"agent_id": 1}, readonly=True) == "Your currency $125.00 ($125.00 available this step)."
    rows = space.replay_rows(1, T1)["economy_transactions"]
    assert [(r["agent_id"], r["kind"], r["amount"]) for r in rows] == [(1, "add_currency", -15.0), (1, "add_currency", 100.0)]


async def test_skill_consumption_and_income_are_set_at_the_step_and_survive_a_snapshot() -> None:
    space = await _economy()
    await space.call_tool("set_skill", {"agent_id": 2, "skill": 1.75})
    assert await space.call_tool("set_consumption", {"agent_id": 2, "consumption": 12.345}) == (
        "consumption will be 12.35 from the end of this step")
    await space.call_tool("set_income", {"agent_id": 1, "income": 55})
    assert await space.call_tool("get_skill", {"agent_id": 2}, readonly=True) == "Your skill is 0 (set to 1.75 at the end of this step)."
    with pytest.raises(ToolCallError, match="income must be a finite number, not negative"):
        await space.call_tool("set_income", {"agent_id": 1, "income": -1})
    await space.step(3600, T1)
    assert await space.call_tool("get_person", {"agent_id": 2}, readonly=True) == (
        "Your economic record: currency $100.00 ($100.00 available this step); skill 1.75; consumption $12.35; income $0.00.")
    assert await space.call_tool("get_income", {"agent_id": 1}, readonly=True) == "Your income is $55.00."
    assert await space.call_tool("get_currency", {"agent_id": 1}, readonly=True) == (
        "Your currency $40.00 ($40.00 available this step).")  # an income record pays nothing
    restored = PersonEconomySpace()
    restored.load_state(space.dump_state())
    assert restored.dump_state() == space.dump_state()
    assert await restored.call_tool("get_consumption", {"agent_id": 2}, readonly=True) == "Your consumption is $12.35."


def test_empty_kwargs_work_and_bad_people_are_refused() -> None:
    PersonEconomySpace()
    with pytest.raises(SpecError, match=r"people\[1\]: unknown keys \['wealth'\]"):
        PersonEconomySpace(people=[{"id": 1}, {"id": 2, "wealth": 3}])
    with pytest.raises(SpecError, match="person 1 is given twice"):
        PersonEconomySpace(people=[{"id": 1, "currency": 5}], accounts={1: 7.0})
    with pytest.raises(SpecError, match="must be finite and not negative"):
        PersonEconomySpace(people=[{"id": 1, "skill": -2}])


async def test_person_economy_space_keeps_the_update_discipline() -> None:
    await check_update_discipline(lambda: PersonEconomySpace(people=PEOPLE, goods={"bread": 2.5}), [
        ToolCall(1, "add_currency", {"amount": -10}),
        ToolCall(2, "set_skill", {"skill": 3}),
        ToolCall(2, "add_currency", {"amount": 5}),
        ToolCall(1, "set_income", {"income": 20}),
        ToolCall(1, "buy", {"good": "bread", "quantity": 4}),
        ToolCall(1, "add_currency", {"amount": -1000}),  # refused: cannot afford
        ToolCall(2, "get_person"),
    ], agent_ids=[1, 2, 3])


def test_the_reference_tools_are_added_and_economy_space_keeps_its_own() -> None:
    reference = {"get_person", "get_currency", "add_currency", "get_skill", "set_skill", "get_consumption",
                 "set_consumption", "get_income", "set_income"}
    assert set(PersonEconomySpace.tools()) == set(EconomySpace.tools()) | reference
    assert reference & set(EconomySpace.tools()) == set()
    assert PersonEconomySpace.tools()["get_person"].kind == "observe" and PersonEconomySpace.tools()["get_person"].readonly
