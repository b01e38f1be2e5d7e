"""SimFaults validation and the FaultPlan's seeded draws."""

from __future__ import annotations

from collections import Counter

import pytest
from pydantic import ValidationError

from engine.llm.sim import FaultPlan, SimFaults
from engine.llm.sim.faults import FaultDraw


@pytest.mark.parametrize(
    "fields",
    [{"rate_500": 1.5}, {"rate_429": -0.1}, {"capacity": 0}, {"latency_ms": -1}, {"rate_429": 0.6, "rate_hang": 0.6}],
)
def test_out_of_range_faults_are_rejected(fields: dict[str, float]) -> None:
    with pytest.raises(ValidationError):
        SimFaults(**fields)


def test_faults_are_frozen() -> None:
    with pytest.raises(ValidationError):
        SimFaults().rate_500 = 0.5  # type: ignore[misc]


def test_no_faults_means_every_call_is_ok_without_latency() -> None:
    plan = FaultPlan(SimFaults())
    assert {(d.outcome, d.latency_s) for d in (plan.draw() for _ in range(100))} == {("ok", 0.0)}


def test_draws_follow_the_rates_and_repeat_for_the_same_seed() -> None:
    faults = SimFaults(rate_429=0.2, rate_500=0.1, rate_hang=0.05, rate_malformed=0.05, latency_ms=50, jitter_ms=20)
    draws = _draws(faults, 4000)
    counts = Counter(d.outcome for d in draws)
    for outcome, rate in (("429", 0.2), ("500", 0.1), ("hang", 0.05), ("malformed", 0.05), ("ok", 0.6)):
        assert abs(counts[outcome] / 4000 - rate) < 0.03
    assert all(d.latency_s >= 0 for d in draws)
    assert _draws(faults, 50) == _draws(faults, 50)
    assert _draws(faults, 50) != _draws(faults.model_copy(update={"seed": 1}), 50)


def _draws(faults: SimFaults, n: int) -> list[FaultDraw]:
    plan = FaultPlan(faults)
    return [plan.draw() for _ in range(n)]
