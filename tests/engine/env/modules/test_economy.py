"""EconomySpace settles at the env step, refuses overdrafts, pays wages and interest, moves prices, replays and persists."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from engine.agent.skills.model import parse_skill
from engine.env.metrics import gini
from engine.env.modules.economy import EconomySpace
from engine.errors import SpecError, ToolCallError

T0 = datetime(2024, 1, 1, 8, 0)
T1 = T0 + timedelta(hours=1)
T2 = T1 + timedelta(hours=1)
T3 = T2 + timedelta(hours=1)
GOODS = {"bread": 2.5, "coat": 40.0}


async def call(space: EconomySpace, tool: str, **args: Any) -> Any:
    return await space.call_tool(tool, args)


async def account(space: EconomySpace, agent_id: int) -> dict[str, Any]:
    return space.dump_state()["accounts"][str(agent_id)]


def economy(**kwargs: Any) -> EconomySpace:
    return EconomySpace(**{"accounts": {1: 100.0, 2: 50.0, 3: 0.0}, "goods": GOODS, **kwargs})


async def test_a_purchase_is_settled_at_the_step_at_the_quoted_price() -> None:
    space = economy()
    await space.init(T0)
    assert await call(space, "buy", agent_id=1, good="bread", quantity=4) == "bought 4 bread for $10.00 (settled at the end of this step)"
    assert (await account(space, 1))["cash"] == 100.0
    assert await space.call_tool("my_account", {"agent_id": 1}, readonly=True) == (
        "Cash $100.00 ($90.00 available this step); bank deposits $0.00 earning 0.00% per step.\n"
        "Salary $0.00 per step; work pays $15.00 per hour.\n"
        "Queued this step: buy 4 bread ($10.00).\n"
        "Prices: bread $2.50, coat $40.00."
    )
    await space.step(3600, T1)
    assert await account(space, 1) == {"cash": 90.0, "deposits": 0.0, "goods": {"bread": 4}}
    assert "You own: 4 bread." in await space.call_tool("my_account", {"agent_id": 1})


async def test_buying_over_the_balance_is_refused_counting_own_queued_spending() -> None:
    space = economy()
    await call(space, "buy", agent_id=2, good="coat", quantity=1)
    with pytest.raises(ToolCallError, match=r"cannot afford 1 coat for \$40.00: you have \$10.00 available this step"):
        await call(space, "buy", agent_id=2, good="coat", quantity=1)
    with pytest.raises(ToolCallError, match=r"cannot afford a deposit for \$10.01"):
        await call(space, "deposit", agent_id=2, amount=10.01)
    await call(space, "buy", agent_id=2, good="bread", quantity=4)
    await space.step(3600, T1)
    assert (await account(space, 2))["cash"] == 0.0
    with pytest.raises(ToolCallError, match=r"cannot afford 1 bread for \$2.50: you have \$0.00"):
        await call(space, "buy", agent_id=2, good="bread", quantity=1)


async def test_work_and_salaries_are_paid_at_the_step() -> None:
    space = economy(salaries={3: 20.0}, hourly_wage=12.5, max_hours_per_step=8)
    assert await call(space, "work", agent_id=3, hours=6) == "6 hours of work queued; you will be paid $75.00 at the end of this step"
    with pytest.raises(ToolCallError, match=r"you can work at most 8 hours per step \(6 already queued\)"):
        await call(space, "work", agent_id=3, hours=2.5)
    # Wages of this step cannot be spent before they arrive.
    with pytest.raises(ToolCallError, match=r"you have \$0.00 available"):
        await call(space, "buy", agent_id=3, good="bread", quantity=1)
    await space.step(3600, T1)
    assert (await account(space, 3))["cash"] == 95.0
    await space.step(3600, T2)
    assert (await account(space, 3))["cash"] == 115.0
    assert space.replay_rows(2, T2)["economy_state"][0]["income"] == 20.0


async def test_bank_deposits_earn_interest_from_the_step_after_they_arrive() -> None:
    space = economy(interest_rate=0.01)
    assert await call(space, "deposit", agent_id=1, amount=60) == "deposit of $60.00 queued"
    with pytest.raises(ToolCallError, match=r"cannot withdraw \$1.00: you have \$0.00 in the bank"):
        await call(space, "withdraw", agent_id=1, amount=1)
    await space.step(3600, T1)
    assert await account(space, 1) == {"cash": 40.0, "deposits": 60.0, "goods": {}}
    await space.step(3600, T2)
    assert (await account(space, 1))["deposits"] == 60.6
    assert await call(space, "withdraw", agent_id=1, amount=50) == "withdrawal of $50.00 queued"
    with pytest.raises(ToolCallError, match=r"cannot withdraw \$11.00: you have \$10.60 in the bank"):
        await call(space, "withdraw", agent_id=1, amount=11)
    await space.step(3600, T3)
    # Interest on the 60.60 held when the tick began, then the withdrawal.
    assert await account(space, 1) == {"cash": 90.0, "deposits": 11.21, "goods": {}}


async def test_transfers_reach_the_payee_at_the_step() -> None:
    space = economy()
    assert await call(space, "transfer", agent_id=1, to_agent_id=3, amount=30) == "$30.00 to agent 3 queued"
    with pytest.raises(ToolCallError, match="you cannot transfer money to yourself"):
        await call(space, "transfer", agent_id=1, to_agent_id=1, amount=1)
    with pytest.raises(ToolCallError, match="agent 7 has no account"):
        await call(space, "transfer", agent_id=1, to_agent_id=7, amount=1)
    with pytest.raises(ToolCallError, match=r"you have \$0.00 available"):
        await call(space, "transfer", agent_id=3, to_agent_id=1, amount=1)
    await space.step(3600, T1)
    assert (await account(space, 1))["cash"] == 70.0
    assert (await account(space, 3))["cash"] == 30.0


async def test_prices_rise_with_demand_above_target_and_fall_below_it() -> None:
    space = economy(price_adjustment=0.1, target_demand=2, min_price=2.4)
    await call(space, "buy", agent_id=1, good="coat", quantity=2)  # at target: unchanged
    await call(space, "buy", agent_id=2, good="bread", quantity=1)  # half the target: -5%
    await space.step(3600, T1)
    assert space.dump_state()["prices"] == {"bread": 2.4, "coat": 40.0}  # 2.375 would undercut min_price
    assert await space.call_tool("list_goods", {}) == "- bread: $2.40 (1 sold last step)\n- coat: $40.00 (2 sold last step)"
    await call(space, "buy", agent_id=1, good="bread", quantity=8)  # four times the target: clamped to +10%
    await space.step(3600, T2)
    assert space.dump_state()["prices"] == {"bread": 2.64, "coat": 36.0}


async def test_fixed_prices_when_price_adjustment_is_zero() -> None:
    space = economy()
    await call(space, "buy", agent_id=1, good="bread", quantity=10)
    await space.step(3600, T1)
    assert space.dump_state()["prices"] == GOODS


async def test_statistics_report_spending_balances_and_inequality() -> None:
    space = economy(accounts={1: 100.0, 2: 50.0, 3: 0.0, 4: 10.0}, salaries={4: 5.0})
    await call(space, "buy", agent_id=1, good="coat", quantity=1)
    await call(space, "deposit", agent_id=2, amount=20)
    await space.step(3600, T1)
    # cash 60, 30, 0, 15; wealth 60, 50, 0, 15
    assert await space.call_tool("economy_statistics", {}) == (
        "Last step: spending $40.00 (total $40.00), income $5.00, interest $0.00. 4 accounts: mean cash $26.25, "
        "median cash $22.50, Gini of wealth 0.430; bank deposits $20.00. Prices: bread $2.50, coat $40.00."
    )


async def test_refusals_are_clear_tool_call_errors() -> None:
    space = economy()
    cases = [
        ("buy", {"agent_id": 1, "good": "caviar", "quantity": 1}, "there is no good 'caviar'; goods: bread, coat"),
        ("buy", {"agent_id": 1, "good": "bread", "quantity": 0}, "quantity must be positive, got 0"),
        ("buy", {"agent_id": 1, "good": "bread", "quantity": 1.5}, "bad arguments for EconomySpace.buy"),
        ("buy", {"agent_id": 1, "good": "bread"}, "bad arguments for EconomySpace.buy: Field required"),
        ("buy", {"agent_id": 9, "good": "bread", "quantity": 1}, "agent 9 has no account"),
        ("work", {"agent_id": 1, "hours": -1}, "hours must be positive"),
        ("work", {"agent_id": 1, "hours": float("nan")}, "hours must be positive"),
        ("deposit", {"agent_id": 1, "amount": 0.001}, r"amount must be at least \$0.01"),
        ("withdraw", {"agent_id": 1, "amount": -5}, r"amount must be at least \$0.01"),
        ("transfer", {"agent_id": 1, "to_agent_id": 2, "amount": float("inf")}, "cannot afford a transfer to agent 2"),
    ]
    for tool, args, message in cases:
        with pytest.raises(ToolCallError, match=message):
            await space.call_tool(tool, args)
    assert space.updates.all() == []
    assert await space.call_tool("my_account", {"agent_id": 9}) == "You have no account in the economy."


def test_bad_constructor_kwargs_are_spec_errors() -> None:
    with pytest.raises(SpecError, match="positive price"):
        EconomySpace(goods={"bread": 0})
    with pytest.raises(SpecError, match="cannot be negative"):
        EconomySpace(interest_rate=-0.1)
    with pytest.raises(SpecError, match="target_demand and min_price must be positive"):
        EconomySpace(target_demand=0)


async def test_bound_agents_get_default_accounts_and_keep_them_after_a_restore(tmp_path: Path) -> None:
    space = EconomySpace(accounts={"1": 5.0}, default_balance=20.0)  # JSON specs give string keys
    space.bind_agents([1, 2])
    assert {k: v["cash"] for k, v in space.dump_state()["accounts"].items()} == {"1": 5.0, "2": 20.0}
    await space.to_workspace(tmp_path)

    fresh = EconomySpace(default_balance=20.0)
    fresh.bind_agents([1, 2, 3])  # the router binds before it restores
    assert await fresh.restore(tmp_path)
    assert {k: v["cash"] for k, v in fresh.dump_state()["accounts"].items()} == {"1": 5.0, "2": 20.0, "3": 20.0}


async def test_a_step_settles_in_agent_order_whatever_the_call_order() -> None:
    calls = [
        ("transfer", {"agent_id": 2, "to_agent_id": 1, "amount": 50}),
        ("buy", {"agent_id": 1, "good": "coat", "quantity": 2}),
        ("work", {"agent_id": 3, "hours": 2}),
        ("deposit", {"agent_id": 1, "amount": 15}),
        ("buy", {"agent_id": 3, "good": "bread", "quantity": 1}),
    ]
    states, rows = [], []
    for order in (calls, sorted(calls, key=lambda c: -c[1]["agent_id"])):
        space = economy(accounts={1: 100.0, 2: 50.0, 3: 5.0}, price_adjustment=0.1, interest_rate=0.05)
        for tool, args in order:
            await space.call_tool(tool, args)
        await space.step(3600, T1)
        states.append(space.dump_state())
        rows.append(space.replay_rows(1, T1))
    assert states[0] == states[1]
    assert rows[0] == rows[1]
    assert [(r["agent_id"], r["kind"]) for r in rows[0]["economy_transactions"]] == [
        (1, "buy"), (1, "deposit"), (2, "transfer"), (3, "work"), (3, "buy"),
    ]
    assert {k: v["cash"] for k, v in states[0]["accounts"].items()} == {"1": 55.0, "2": 0.0, "3": 32.5}


async def test_replay_rows_give_aggregates_accounts_and_transactions_per_step() -> None:
    space = economy(salaries={2: 10.0})
    await call(space, "buy", agent_id=1, good="bread", quantity=2)
    await call(space, "transfer", agent_id=1, to_agent_id=3, amount=5)
    await space.step(3600, T1)
    step1 = space.replay_rows(1, T1)
    assert step1["economy_state"] == [{
        "step": 1, "t": T1, "spending": 5.0, "income": 10.0, "interest": 0.0, "spending_total": 5.0,
        "mean_cash": 51.67, "median_cash": 60.0, "gini": pytest.approx(gini([90.0, 60.0, 5.0])), "deposits_total": 0.0,
        "accounts": 3, "prices": {"bread": 2.5, "coat": 40.0},
    }]
    assert step1["economy_accounts"] == [
        {"step": 1, "t": T1, "agent_id": 1, "cash": 90.0, "deposits": 0.0, "spent": 5.0, "earned": 0.0},
        {"step": 1, "t": T1, "agent_id": 2, "cash": 60.0, "deposits": 0.0, "spent": 0.0, "earned": 10.0},
        {"step": 1, "t": T1, "agent_id": 3, "cash": 5.0, "deposits": 0.0, "spent": 0.0, "earned": 0.0},
    ]
    assert step1["economy_transactions"] == [
        {"step": 1, "t": T1, "agent_id": 1, "kind": "buy", "good": "bread", "quantity": 2.0, "amount": 5.0, "to_agent_id": None},
        {"step": 1, "t": T1, "agent_id": 1, "kind": "transfer", "good": None, "quantity": None, "amount": 5.0, "to_agent_id": 3},
    ]
    await space.step(3600, T2)
    step2 = space.replay_rows(2, T2)
    assert step2["economy_transactions"] == []
    assert (step2["economy_state"][0]["spending"], step2["economy_state"][0]["spending_total"]) == (0.0, 5.0)

    schemas = {s.name: s for s in EconomySpace.replay_datasets()}
    assert all(name.startswith("economy_") for name in schemas) and set(step1) == set(schemas)
    for name, schema in schemas.items():
        assert all(list(row) == [c.name for c in schema.columns] for row in step1[name])
        assert schema.to_table(step1[name]).num_rows == len(step1[name])


async def test_state_survives_to_workspace_and_from_workspace_including_queued_operations(tmp_path: Path) -> None:
    kwargs = {"accounts": {1: 100.0, 2: 50.0, 3: 0.0}, "goods": GOODS, "price_adjustment": 0.1, "interest_rate": 0.02}
    space = EconomySpace(**kwargs)
    space.bind_workspace(tmp_path)
    await space.init(T0)
    await call(space, "deposit", agent_id=1, amount=50)
    await call(space, "buy", agent_id=2, good="coat", quantity=1)
    await space.step(3600, T1)
    await call(space, "work", agent_id=3, hours=4)
    await call(space, "buy", agent_id=1, good="bread", quantity=3)
    await space.to_workspace()

    fresh = await EconomySpace.from_workspace(tmp_path, **kwargs)
    assert isinstance(fresh, EconomySpace)
    assert fresh.t == T1
    assert fresh.dump_state() == space.dump_state()
    assert fresh.replay_rows(1, T1) == space.replay_rows(1, T1)
    # Bread fell to $2.25 with no demand in step 1; the queued 3 bread still count against agent 1.
    with pytest.raises(ToolCallError, match=r"cannot afford 2 coat for \$80.00: you have \$43.25 available"):
        await call(fresh, "buy", agent_id=1, good="coat", quantity=2)

    await fresh.step(3600, T2)
    await space.step(3600, T2)
    assert fresh.dump_state() == space.dump_state()
    assert await fresh.call_tool("economy_statistics", {}) == await space.call_tool("economy_statistics", {})
    assert (await account(fresh, 3))["cash"] == 60.0


def test_the_module_ships_a_valid_agent_skill() -> None:
    (skills_dir,) = EconomySpace.skill_dirs()
    assert [parse_skill(d, "env:EconomySpace").name for d in sorted(skills_dir.iterdir())] == ["budgeting"]
