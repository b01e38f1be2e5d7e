"""Issue 38 over REST: a 3-tier experiment (LLM agents, archetype groups, rule members) submitted to a real uvicorn
on the session LocalCluster; each tick event of its stream carries the tick's token telemetry by tier, the
experiment's span on the Dask dashboard holds its token sums, and its datasets say each row's tier and call id."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx
from distributed import Client

from service.settings import ServiceSettings
from tests.service.live import serve, wait_until_final
from tests.service.sse import read_events

TICKS = 2
SPEC = {
    "name": "tiers-rest", "seed": 4, "llm": {"default": {"model": "sim/social"}},
    "population": [
        {"count": 3},
        {"count": 24, "profile_template": {"party": ["red", "blue"]}, "tier": "archetype", "archetype": {
            "key": ["party"], "group_size": 6, "options": [
                {"name": "post", "tool": "create_post", "arguments": {"text": "{text}"}}, {"name": "idle"}]}},
        {"count": 20, "tier": "rule", "rule": {"policy": "social_poster"}},
    ],
    "environment": {"modules": [{"type": "SocialMediaSpace"}]},
    "steps": [{"type": "run", "num_steps": TICKS, "tick": 3600}],
}


def _span_tokens(experiment_id: str, dask_scheduler: Any) -> dict[str, float]:
    """The experiment's span's token metrics, and what the fine performance metrics page offers as units."""
    from distributed.dashboard.components.scheduler import FinePerformanceMetrics

    spans = dask_scheduler.extensions["spans"]
    found: dict[str, float] = {}
    for span in spans.find_by_tags(experiment_id):
        for key, value in span.cumulative_worker_metrics.items():
            if key[0] == "execute" and key[-1] in ("tokens", "calls"):
                found[f"{key[-2]} ({key[-1]})"] = found.get(f"{key[-2]} ({key[-1]})", 0.0) + value
    page = FinePerformanceMetrics(dask_scheduler)
    page.update()
    found["page offers tokens"] = float("tokens" in page.unit_selector.options)
    return found


def test_a_three_tier_experiment_streams_its_token_telemetry_and_puts_it_on_its_span(cluster_address: str, tmp_path: Path) -> None:
    with serve(ServiceSettings(data_dir=tmp_path, scheduler=cluster_address)) as http:
        experiment_id = http.post("/experiments", json=SPEC).json()["id"]
        events = read_events(http, experiment_id, timeout=600)
        record = wait_until_final(http, experiment_id)
        assert record["status"] == "completed", record
        tiers = http.post(f"/experiments/{experiment_id}/sql", json={"sql": (
            "SELECT tier, count(*) AS n, count(call_id) AS with_call FROM actions GROUP BY tier ORDER BY tier")}).json()
        calls = http.post(f"/experiments/{experiment_id}/sql", json={"sql": (
            "SELECT step, count(*) AS n FROM llm_calls WHERE caller LIKE 'archetype:%' GROUP BY step ORDER BY step")}).json()

    ticks = [e.data for e in events if e.name == "tick"]
    assert [t["ticks_done"] for t in ticks] == [1, 2]
    for tick in ticks:
        tokens = tick["tokens"]
        assert {"llm", "archetype", "rule", "total"} <= set(tokens)
        assert tokens["llm"]["members"] == 3 and tokens["archetype"]["members"] == 24 and tokens["rule"]["calls"] == 0
        assert tokens["archetype"]["calls"] == 4  # two parties of 12, groups of 6: one call per group
        assert tokens["llm"]["prompt_p95"] >= tokens["llm"]["prompt_p50"] > 0 and tokens["total"]["prompt_max"] > 0
    assert ticks[-1]["tokens"]["llm"]["prefix_share"] > 0  # tick 2's prompts repeat tick 1's start
    assert record["progress"]["tokens"]["total"]["calls"] == ticks[-1]["tokens"]["total"]["calls"]

    assert tiers["rows"] == [["archetype", 48, 48], ["llm", 6, 0], ["rule", 40, 0]]  # (tier, rows, rows with a call id)
    assert calls["rows"] == [[1, 4], [2, 4]]

    with Client(cluster_address) as dask:
        deadline = time.monotonic() + 120  # worker metrics reach the scheduler with heartbeats
        while True:
            span = dask.run_on_scheduler(_span_tokens, experiment_id)
            if span.get("archetype prompt tokens (tokens)") or time.monotonic() > deadline:
                break
            time.sleep(0.5)
    assert span["page offers tokens"] == 1.0
    assert span["archetype calls (calls)"] == 4 * TICKS
    assert span["archetype prompt tokens (tokens)"] > 0 and span["llm prompt tokens (tokens)"] > 0
    assert span["llm completion tokens (tokens)"] > 0
    assert httpx.get(str(record["dashboard_link"]), timeout=30).status_code == 200
