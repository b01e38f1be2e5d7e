"""The estimate's arithmetic: groups of sample calls projected to ranges, and the budget refusal (sans-IO)."""

from __future__ import annotations

import pytest

from engine.society.run.projection import Group, Range, over_budget, project, total
from engine.spec import BudgetSpec


def test_a_group_without_spread_projects_one_number() -> None:
    group = Group("tick", "default", sample_units=4, full_units=200)
    for agent in range(4):
        group.add((agent, 1), 1, 100, 10)

    assert project(group)["calls"] == Range(200, 200, 200)
    assert project(group)["input_tokens"] == Range(20_000, 20_000, 20_000)


def test_spread_in_the_sample_widens_the_range_around_the_mean_and_units_without_calls_count_as_zero() -> None:
    group = Group("tick", "default", sample_units=4, full_units=100)
    group.add("a", 1, 0, 0)
    group.add("b", 3, 0, 0)
    group.add("c", 2, 0, 0)  # the fourth unit made no call

    calls = project(group)["calls"]
    assert calls.expected == pytest.approx(150)  # mean 1.5 per unit
    assert 0 <= calls.low < 150 < calls.high
    assert calls.high - 150 == pytest.approx(150 - calls.low)


def test_a_group_the_sample_ran_in_full_has_no_spread() -> None:
    group = Group("ask", "default", sample_units=1, full_units=1)
    group.add("step", 3, 30, 3)
    spread = Group("questionnaire", "default", sample_units=2, full_units=2)
    spread.add(1, 1, 0, 0)
    spread.add(2, 3, 0, 0)

    assert project(group)["calls"] == Range(3, 3, 3)
    assert project(spread)["calls"] == Range(4, 4, 4)


def test_totals_add_groups_low_to_low_and_high_to_high() -> None:
    once = Group("once", "coder", 1, 1)
    once.add("run", 1, 50, 50)
    ticks = Group("tick", "default", 2, 10)
    ticks.add(1, 1, 10, 1)
    ticks.add(2, 3, 10, 1)

    calls = total([once, ticks])["calls"]
    assert calls.expected == pytest.approx(21) and calls.low == pytest.approx(1 + project(ticks)["calls"].low)


def test_the_refusal_names_the_cap_the_upper_estimate_passes_and_none_within_the_caps() -> None:
    calls, tokens = Range(8, 9, 10), Range(900, 1000, 1100)

    assert over_budget(None, calls, tokens, None) is None
    assert over_budget(BudgetSpec(max_calls=10, max_tokens=1100), calls, tokens, None) is None
    assert over_budget(BudgetSpec(max_calls=9), calls, tokens, None) == (
        "budget.max_calls is 9 but the estimate reaches 10 calls (its upper end)")
    assert "budget.max_tokens is 1000" in (over_budget(BudgetSpec(max_tokens=1000), calls, tokens, None) or "")
    assert "budget.max_cost_usd is 0.5" in (over_budget(BudgetSpec(max_cost_usd=0.5), calls, tokens, Range(0.4, 0.5, 0.6)) or "")
    # an unpriced model cannot be held to a dollar cap by its estimate
    assert over_budget(BudgetSpec(max_cost_usd=0.5), calls, tokens, None) is None
