"""The driver's typed control of the env actor: when a tick steps the env, when a consult settles it, when a begin is idle."""

from __future__ import annotations

from datetime import datetime

import pytest

from engine.env.control import BeginTick, EndConsult, EndTick, TickEnd
from engine.llm.budget import Allowance

T = datetime(2026, 1, 1, 8)


def test_a_begin_without_a_time_or_a_budget_is_idle() -> None:
    assert BeginTick(None).idle
    assert not BeginTick(T).idle  # a tick sets the env's time
    assert not BeginTick(None, Allowance(calls=3)).idle  # a budgeted consult opens the router's share


@pytest.mark.parametrize(("stopped", "refused", "steps"), [(0, 0, True), (2, 0, False), (0, 1, False), (2, 1, False)])
def test_the_env_steps_only_when_the_budget_stopped_and_refused_nothing(stopped: int, refused: int, steps: bool) -> None:
    assert EndTick(1, 600, T, 1, "run", stopped=stopped).steps(refused) is steps


def test_only_an_intervention_the_budget_refused_nothing_of_settles() -> None:
    assert EndConsult(3, settle=True).settles(0)
    assert not EndConsult(3, settle=True).settles(1)
    assert not EndConsult(3).settles(0)  # an ask


def test_an_end_that_did_not_step_reports_nothing_staged() -> None:
    end = TickEnd((), 2)
    assert (end.staged, dict(end.counts), end.snapshot) == ((), {}, None)
