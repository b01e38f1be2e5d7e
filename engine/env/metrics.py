"""Env modules' summary series as data: the ``env_metrics`` replay dataset, its rows, and the Gini helper.

A module declares the series it reports (``EnvBase.METRICS``: name -> description, extended per
instance by :meth:`EnvBase.metric_descriptions` when names depend on kwargs, such as one price per
good) and returns the step's values from :meth:`EnvBase.metrics`. After each env step the actor
turns them into ``env_metrics`` rows (:func:`metric_rows`), one per module metric, staged in the
tick's transaction beside the modules' own replay rows. A metric with no value in a step (a mean
over no trades) is left out of that step's values; it is never reported as a made-up number.
This module has no I/O.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from engine.errors import EnvMetricError
from engine.storage.catalog import RUN_COLUMN, Column, DatasetSchema

__all__ = ["ENV_METRICS", "MetricSource", "check_declared", "gini", "metric_rows"]

ENV_METRICS = DatasetSchema(
    name="env_metrics",
    kind="env",
    description="one row per env module metric per env step: each module's own summary series "
                "(messages per step, Gini of wealth, cooperation rate, ...), as the module declares them",
    columns=(
        RUN_COLUMN,
        Column(name="step", type="int64", description="society step (1-based) whose env step reported the value"),
        Column(name="t", type="timestamp", description="simulated time at the end of that step"),
        Column(name="module", type="string", description="env module class that reported it"),
        Column(name="metric", type="string", description="the metric's name, as the module declares it"),
        Column(name="value", type="float64", description="its value after the step"),
        Column(name="description", type="string", description="what the metric measures, as the module declares it"),
    ),
)


class MetricSource(Protocol):
    """What :func:`metric_rows` reads of a module (an ``EnvBase``): its name, its declared series, this step's values."""

    @property
    def name(self) -> str: ...

    def metric_descriptions(self) -> dict[str, str]: ...

    def metrics(self) -> dict[str, float]: ...


def gini(values: Sequence[float]) -> float | None:
    """The Gini coefficient of non-negative ``values``: 0 when all are equal, (n-1)/n when one holds everything.

    Returns:
        The coefficient, 0.0 when every value is 0 (all are equal), None for no values (undefined).

    Raises:
        ValueError: a negative value (the coefficient is not bounded for those).
    """
    xs = sorted(values)
    if not xs:
        return None
    if xs[0] < 0:
        raise ValueError(f"the Gini coefficient needs non-negative values, got {xs[0]}")
    total = sum(xs)
    if total == 0:
        return 0.0
    weighted = sum((i + 1) * x for i, x in enumerate(xs))
    return 2 * weighted / (len(xs) * total) - (len(xs) + 1) / len(xs)


def check_declared(owner: str, declared: Mapping[str, str]) -> dict[str, str]:
    """``declared`` as a plain dict, after checking every name and description is a non-empty string.

    Raises:
        EnvMetricError: a name or description that is not a non-empty string (the message names ``owner``).
    """
    for name, description in declared.items():
        if not isinstance(name, str) or not name:
            raise EnvMetricError(f"{owner} declares a metric whose name is not a non-empty string: {name!r}")
        if not isinstance(description, str) or not description.strip():
            raise EnvMetricError(f"{owner} declares metric {name!r} without a description")
    return dict(declared)


def _value(module: str, metric: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise EnvMetricError(f"{module} reported metric {metric!r} as {value!r}: a metric value is a finite number")
    number = float(value)
    if not math.isfinite(number):
        raise EnvMetricError(f"{module} reported metric {metric!r} as {number}: a metric value must be finite "
                             "(leave a metric out of a step in which it has no value)")
    return number


def metric_rows(run: str, step: int, t: datetime, modules: Iterable[MetricSource]) -> list[dict[str, Any]]:
    """The ``env_metrics`` rows of one env step: each module's reported values, in its declaration order.

    Args:
        run: the run id the rows carry.
        step: the society step whose env step just ran.
        t: simulated time at the end of that step.
        modules: the run's env modules, after their step.

    Raises:
        EnvMetricError: a module reported a name it does not declare, or a value that is not a finite number.
    """
    rows: list[dict[str, Any]] = []
    for module in modules:
        values = module.metrics()
        if not values:
            continue
        declared = check_declared(module.name, module.metric_descriptions())
        if undeclared := sorted(set(values) - set(declared)):
            raise EnvMetricError(f"{module.name} reported undeclared metrics {undeclared}; it declares {sorted(declared)}")
        rows += [{"run": run, "step": step, "t": t, "module": module.name, "metric": name,
                  "value": _value(module.name, name, values[name]), "description": description}
                 for name, description in declared.items() if name in values]
    return rows
