"""From a sample run's LLM calls to a whole spec's calls, tokens and dollars, as ranges (sans-IO).

Each call of the sample falls in one :class:`Group`, by what its count grows with:

- ``tick``: an agent's calls in a tick (its ReAct turns and the env router's calls serving its
  asks), per agent-step; ``tick-env``: a tick's calls that serve no agent, per tick;
- ``questionnaire``: per targeted agent of that questionnaire step;
- ``ask`` / ``intervene``: the helper's calls and the env calls its plan makes, once per step;
- ``once``: once per run (the env's world description).

A group's expected value is the sample's mean per unit times the spec's units. Its range is the
95% interval of that mean (two standard errors, with the finite-population correction, so a
group the sample ran in full has no spread), times the spec's units: the sample's spread is what
makes an estimate uncertain, and a sample that saw no spread gives one number. Ranges add up
group by group, low to low and high to high.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

from engine.spec import BudgetSpec

__all__ = ["METRICS", "Group", "Range", "over_budget", "project", "total"]

#: What is projected for each group.
METRICS = ("calls", "input_tokens", "output_tokens")


@dataclass(frozen=True)
class Range:
    """A projected quantity: its expected value and the interval around it."""

    low: float
    expected: float
    high: float

    def __add__(self, other: Range) -> Range:
        return Range(self.low + other.low, self.expected + other.expected, self.high + other.high)

    def times(self, factor: float) -> Range:
        """This range scaled by ``factor`` (at least 0)."""
        return Range(self.low * factor, self.expected * factor, self.high * factor)


ZERO = Range(0.0, 0.0, 0.0)


@dataclass
class Group:
    """The sample's calls that grow with one unit (agent-steps, targeted agents, steps, runs)."""

    kind: str  #: tick | tick-env | questionnaire | ask | intervene | once
    role: str  #: the client role the calls went to (priced by that client)
    sample_units: int  #: units the sample ran
    full_units: int  #: units the whole spec runs
    #: per unit the sample saw calls for: (calls, input tokens, output tokens); the other units saw none
    observed: dict[object, tuple[int, int, int]] = field(default_factory=dict)

    def add(self, unit: object, calls: int, input_tokens: int, output_tokens: int) -> None:
        was = self.observed.get(unit, (0, 0, 0))
        self.observed[unit] = (was[0] + calls, was[1] + input_tokens, was[2] + output_tokens)


def _project(values: list[int], units: int, full: int) -> Range:
    n = max(units, len(values), 1)
    mean = sum(values) / n
    if n > 1:
        variance = (sum(v * v for v in values) - n * mean * mean) / (n - 1)
        correction = max(0.0, (full - n) / (full - 1)) if full > 1 else 0.0
        margin = 2 * full * math.sqrt(max(variance, 0.0) / n * correction)
    else:
        margin = 0.0 if full <= n else mean * full  # one unit seen: its spread is unknown, so up to twice as much
    expected = mean * full
    return Range(max(0.0, expected - margin), expected, expected + margin)


def project(group: Group) -> dict[str, Range]:
    """The group's calls, input and output tokens over the whole spec."""
    columns = list(zip(*group.observed.values(), strict=True)) or [(), (), ()]
    return {metric: _project(list(values), group.sample_units, group.full_units)
            for metric, values in zip(METRICS, columns, strict=True)}


def total(groups: Iterable[Group]) -> dict[str, Range]:
    """Every metric summed over ``groups``."""
    sums = dict.fromkeys(METRICS, ZERO)
    for group in groups:
        for metric, value in project(group).items():
            sums[metric] = sums[metric] + value
    return sums


def over_budget(budget: BudgetSpec | None, calls: Range, tokens: Range, cost_usd: Range | None) -> str | None:
    """Which cap of ``budget`` the upper estimate passes, as the refusal says it (None: within every cap)."""
    if budget is None:
        return None
    checks = (("max_calls", budget.max_calls, calls.high, "calls"), ("max_tokens", budget.max_tokens, tokens.high, "tokens"),
              ("max_cost_usd", budget.max_cost_usd, cost_usd.high if cost_usd else None, "USD"))
    for name, cap, high, unit in checks:
        if cap is not None and high is not None and high > cap:
            return f"budget.{name} is {cap:g} but the estimate reaches {high:,.4g} {unit} (its upper end)"
    return None
