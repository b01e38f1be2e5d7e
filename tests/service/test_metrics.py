"""``GET /metrics``: the exposition format, the tick histogram hook, and the figures of a live service."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from engine.cluster_options import IN_PROCESS
from service.admission.auth import create_token
from service.metrics import ServiceMetrics, TickTimer, exposition
from service.registry import ExperimentRecord
from service.settings import ServiceSettings
from tests.service.live import serve, wait_until_final

_SAMPLE = re.compile(r'^([a-z_]+)(\{[a-z]+="[^"]*"\})? (-?[0-9.e+-]+|\+Inf)$')


def samples(page: str) -> dict[str, float]:
    """``name{labels}`` → value, checking that every line is a comment or a well-formed sample."""
    found = {}
    for line in page.splitlines():
        if line.startswith("# "):
            assert re.match(r"^# (HELP|TYPE) [a-z_]+ .+$", line), line
            continue
        match = _SAMPLE.match(line)
        assert match, f"not a sample line: {line!r}"
        found[match.group(1) + (match.group(2) or "")] = float(match.group(3))
    return found


def record(experiment_id: str, status: str, calls: int | None = None) -> ExperimentRecord:
    return ExperimentRecord(
        id=experiment_id, name="m", status=status, created_at=datetime.now(UTC), run_dir=Path("/nonexistent"),
        llm_calls=calls, input_tokens=None if calls is None else 10 * calls, output_tokens=None if calls is None else calls,
    )


def test_observe_tick_fills_cumulative_buckets_with_upper_bounds_inclusive() -> None:
    metrics = ServiceMetrics(tick_buckets=(0.5, 1.0))
    for seconds in (0.1, 0.5, 0.75, 3.0):
        metrics.observe_tick(seconds)
    page = samples(exposition([], metrics))
    assert page['polis_tick_duration_seconds_bucket{le="0.5"}'] == 2
    assert page['polis_tick_duration_seconds_bucket{le="1.0"}'] == 3
    assert page['polis_tick_duration_seconds_bucket{le="+Inf"}'] == 4
    assert page["polis_tick_duration_seconds_count"] == 4
    assert page["polis_tick_duration_seconds_sum"] == pytest.approx(4.35)


@pytest.mark.parametrize("seconds", [-0.1, math.nan, math.inf])
def test_observe_tick_refuses_a_duration_that_is_no_duration(seconds: float) -> None:
    with pytest.raises(ValueError, match="tick duration"):
        ServiceMetrics().observe_tick(seconds)


def test_bucket_bounds_must_ascend() -> None:
    with pytest.raises(ValueError, match="ascending"):
        ServiceMetrics(tick_buckets=(1.0, 0.5))


def test_exposition_counts_statuses_queue_and_usage_of_reported_runs() -> None:
    records = [record("a", "queued"), record("b", "queued"), record("c", "running"), record("d", "completed", calls=7),
               record("e", "failed", calls=2)]
    page = samples(exposition(records, ServiceMetrics()))
    assert page['polis_experiments{status="queued"}'] == 2
    assert page['polis_experiments{status="running"}'] == 1
    assert page['polis_experiments{status="cancelled"}'] == 0  # every status is a series, zero or not
    assert page["polis_queue_length"] == 2
    assert page["polis_llm_calls"] == 9
    assert page["polis_llm_input_tokens"] == 90
    assert page["polis_llm_output_tokens"] == 9


def test_exposition_declares_each_family_once_before_its_samples() -> None:
    page = exposition([record("a", "completed", calls=1)], ServiceMetrics())
    types = re.findall(r"^# TYPE (\S+) (\S+)$", page, flags=re.MULTILINE)
    assert dict(types) == {
        "polis_experiments": "gauge", "polis_queue_length": "gauge", "polis_llm_calls": "gauge",
        "polis_llm_input_tokens": "gauge", "polis_llm_output_tokens": "gauge",
        "polis_tick_duration_seconds": "histogram",
    }
    assert len(types) == 6 and page.endswith("\n")


def test_live_metrics_need_no_token_and_count_a_finished_run(
    tmp_path: Path, make_spec_data: Callable[..., dict]
) -> None:
    tokens = tmp_path / "tokens.json"
    token = create_token(tokens, "lab-a")
    settings = ServiceSettings(data_dir=tmp_path / "data", scheduler=IN_PROCESS, auth_tokens=tokens)
    with serve(settings, token=token) as http:
        submitted = http.post("/experiments", json=make_spec_data("metrics"))
        assert submitted.status_code == 201, submitted.text
        done = wait_until_final(http, submitted.json()["id"])
        response = http.get("/metrics", headers={"Authorization": ""})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    page = samples(response.text)
    assert page[f'polis_experiments{{status="{done["status"]}"}}'] == 1
    assert page["polis_queue_length"] == 0
    assert page["polis_llm_calls"] == done["usage"]["llm_calls"] >= 1
    assert page["polis_llm_input_tokens"] == done["usage"]["input_tokens"]


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_tick_timer_observes_the_time_between_reports_whose_ticks_grew() -> None:
    metrics, clock = ServiceMetrics(tick_buckets=(1.0, 5.0)), FakeClock()
    timer = TickTimer(metrics, clock)
    timer(0)  # the run starts
    clock.now += 0.5
    timer(0)  # a report inside the first tick ends nothing
    clock.now += 0.25
    timer(1)  # tick 1: 0.75 s
    clock.now += 6.0
    timer(3)  # ticks 2 and 3, skipped by the reports: 3 s each
    snapshot = metrics.tick_durations()
    assert snapshot.count == 3
    assert snapshot.counts == (1, 2, 0)
    assert snapshot.total == pytest.approx(6.75)


def test_tick_timer_restarts_when_the_count_goes_back() -> None:
    metrics, clock = ServiceMetrics(), FakeClock()
    timer = TickTimer(metrics, clock)
    timer(5)
    clock.now += 50
    timer(0)  # a new run (or a resume counting from zero) is no 50 s tick
    clock.now += 1
    timer(1)
    assert metrics.tick_durations().count == 1
    assert metrics.tick_durations().total == pytest.approx(1.0)
