"""The env metric contract: the Gini helper, declared names and finite values, and the rows the env step writes."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

import pytest

from engine.env.base import EnvBase
from engine.env.metrics import ENV_METRICS, gini, metric_rows
from engine.errors import EnvMetricError

T1 = datetime(2026, 1, 1, 9, 0)


def test_gini_of_known_distributions() -> None:
    assert gini([1, 1, 1, 1]) == pytest.approx(0.0)
    assert gini([0, 0, 0, 1]) == pytest.approx(0.75)
    assert gini([1.0, 2.0, 3.0, 4.0]) == pytest.approx(0.25)
    assert gini([0.0, 0.0, 0.0, 100.0]) == pytest.approx(0.75)
    assert gini([7.0]) == pytest.approx(0.0)
    assert gini([4, 1, 3, 2]) == gini([1, 2, 3, 4])  # the order of the values does not matter


def test_gini_is_zero_when_nobody_has_anything_and_undefined_for_nobody() -> None:
    assert gini([0.0, 0.0]) == 0.0
    assert gini([]) is None


def test_gini_refuses_negative_values() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        gini([5.0, -1.0])


class Counter(EnvBase):
    """Reports what the test sets in ``values``."""

    METRICS = {"sent": "messages sent in this step", "mean_price": "mean price after this step"}

    def __init__(self) -> None:
        super().__init__()
        self.values: dict[str, Any] = {}

    def metrics(self) -> dict[str, float]:
        return dict(self.values)


class Silent(EnvBase):
    """Declares no metric."""


def test_rows_follow_the_declaration_order_and_carry_run_step_time_and_description() -> None:
    counter = Counter()
    counter.values = {"mean_price": 2.5, "sent": 3}
    rows = metric_rows("run-a", 4, T1, [Silent(), counter])
    assert rows == [
        {"run": "run-a", "step": 4, "t": T1, "module": "Counter", "metric": "sent", "value": 3.0,
         "description": "messages sent in this step"},
        {"run": "run-a", "step": 4, "t": T1, "module": "Counter", "metric": "mean_price", "value": 2.5,
         "description": "mean price after this step"},
    ]
    assert all(isinstance(r["value"], float) for r in rows)
    assert ENV_METRICS.to_table(rows).num_rows == 2  # the rows fit the dataset's schema


def test_a_metric_left_out_of_a_step_has_no_row_and_a_module_without_metrics_writes_none() -> None:
    counter = Counter()
    counter.values = {"sent": 0}
    assert [r["metric"] for r in metric_rows("r", 1, T1, [counter])] == ["sent"]
    assert metric_rows("r", 1, T1, [Silent()]) == []


def test_an_undeclared_metric_is_an_error_naming_the_module_and_the_metric() -> None:
    counter = Counter()
    counter.values = {"sent": 1, "likes": 2}
    with pytest.raises(EnvMetricError, match=r"Counter reported undeclared metrics \['likes'\]"):
        metric_rows("r", 1, T1, [counter])


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_value_is_an_error_naming_the_module_and_the_metric(value: float) -> None:
    counter = Counter()
    counter.values = {"mean_price": value}
    with pytest.raises(EnvMetricError, match=r"Counter reported metric 'mean_price' as .*must be finite"):
        metric_rows("r", 1, T1, [counter])


@pytest.mark.parametrize("value", ["3", None, True])
def test_a_value_that_is_not_a_number_is_an_error(value: Any) -> None:
    counter = Counter()
    counter.values = {"sent": value}
    with pytest.raises(EnvMetricError, match=r"Counter reported metric 'sent' as .*finite number"):
        metric_rows("r", 1, T1, [counter])


def test_a_metric_declared_without_a_description_is_refused_when_the_class_is_defined() -> None:
    with pytest.raises(EnvMetricError, match=r"Undescribed declares metric 'sent' without a description"):
        type("Undescribed", (EnvBase,), {"METRICS": {"sent": " "}})


def test_names_declared_per_instance_are_accepted_and_others_still_refused() -> None:
    class Market(Counter):
        def metric_descriptions(self) -> dict[str, str]:
            return {**self.METRICS, "price_bread": "price of bread"}

    market = Market()
    market.values = {"price_bread": 2.0}
    assert [(r["metric"], r["description"]) for r in metric_rows("r", 1, T1, [market])] == [("price_bread", "price of bread")]
    market.values = {"price_coat": 9.0}
    with pytest.raises(EnvMetricError, match="price_coat"):
        metric_rows("r", 1, T1, [market])
