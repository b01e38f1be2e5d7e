"""An experiment on the Dask dashboard, through the service: a real uvicorn on the session LocalCluster
(which runs a dashboard), ``/cluster``'s and its experiment JSON's ``dashboard_link``, and what that page shows for it."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from dask.utils import key_split
from distributed import Client, LocalCluster

from engine.society.run.dashboard import AGENTS, ENV_ROUTER, FINE_METRICS_PAGE, key_kind
from service.settings import ServiceSettings
from tests.engine.society.span_ledger import SpanLedger, read_ledger
from tests.service.live import serve, wait_until_final


def _page_view(tag: str, dask_scheduler: Any) -> tuple[list[str], list[str]]:
    """What ``/individual-fine-performance-metrics`` offers under "Filter by span tag", and the task
    prefixes it charts once ``tag`` is picked there (its own component, on the scheduler's state)."""
    from distributed.dashboard.components.scheduler import FinePerformanceMetrics

    page = FinePerformanceMetrics(dask_scheduler)
    page.update()
    tags = list(page.span_tag_selector.options)
    page.span_tag_selector.value = [tag]
    page.update()
    return tags, list(page.visible_functions)


def _wait_for_view(dask: Client, experiment_id: str, timeout_s: float = 120.0) -> tuple[list[str], list[str]]:
    """Worker metrics reach the scheduler with heartbeats (late, on a busy machine): wait until the page charts the experiment's batches."""
    deadline = time.monotonic() + timeout_s
    while True:
        tags, charted = dask.run_on_scheduler(_page_view, experiment_id)
        if f"polis_{experiment_id}_{AGENTS}" in charted or time.monotonic() > deadline:
            return tags, charted
        time.sleep(0.5)


def test_two_experiments_of_one_name_link_the_span_page_and_run_in_their_own_spans(
    cluster_address: str, tmp_path: Path, make_spec_data: Callable[..., dict]
) -> None:
    with Client(cluster_address) as dask:
        dask.register_plugin(SpanLedger())
        with serve(ServiceSettings(data_dir=tmp_path, scheduler=cluster_address)) as http:
            ids = [http.post("/experiments", json=make_spec_data("same-name")).json()["id"] for _ in range(2)]
            bodies = [wait_until_final(http, experiment_id) for experiment_id in ids]
            cluster_link = http.get("/cluster").json()["dashboard_link"]
        spans = dask.run_on_scheduler(read_ledger)
        views = {experiment_id: _wait_for_view(dask, experiment_id) for experiment_id in ids}

    page = cluster_link.removesuffix("/status") + f"/{FINE_METRICS_PAGE}"
    assert cluster_link.endswith("/status") and [b["status"] for b in bodies] == ["completed"] * 2
    assert [b["dashboard_link"] for b in bodies] == [page, page]
    assert httpx.get(page, timeout=30).status_code == 200
    prefixes = []
    for experiment_id in ids:
        mine = {key: name for key, name in spans.items() if key.startswith(f"polis_{experiment_id}_")}
        assert {key_kind(key) for key in mine} == {AGENTS, ENV_ROUTER} and set(mine.values()) == {(experiment_id,)}
        prefixes.append({key_split(key) for key in mine})
        tags, charted = views[experiment_id]
        assert set(ids) <= set(tags)  # the page's span filter offers each experiment by its id
        assert f"polis_{experiment_id}_{AGENTS}" in charted and not any(ids[ids.index(experiment_id) - 1] in f for f in charted)
    assert prefixes[0].isdisjoint(prefixes[1])


def test_on_a_scheduler_without_a_dashboard_the_experiment_links_null(tmp_path: Path, make_spec_data: Callable[..., dict]) -> None:
    # As `dask scheduler --no-dashboard`: its HTTP server answers /health, and it reports that as the "dashboard" service.
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, protocol="tcp://", host="127.0.0.1",
                      dashboard_address="127.0.0.1:0",
                      scheduler_kwargs={"dashboard": False}) as cluster:
        with serve(ServiceSettings(data_dir=tmp_path, scheduler=cluster.scheduler_address)) as http:
            created = http.post("/experiments", json=make_spec_data("no-dashboard")).json()
            finished = wait_until_final(http, created["id"])
            cluster = http.get("/cluster").json()
    assert (created["dashboard_link"], finished["dashboard_link"], cluster["dashboard_link"]) == (None, None, None)
    assert finished["status"] == "completed", finished["error"]


def test_on_a_cluster_the_cluster_route_and_an_experiment_link_the_dashboard_and_health_names_nothing(
    cluster_address: str, tmp_path: Path, make_spec_data: Callable[..., dict]
) -> None:
    with serve(ServiceSettings(data_dir=tmp_path, scheduler=cluster_address)) as http:
        health, body = http.get("/health").json(), http.get("/cluster").json()
        completed = wait_until_final(http, http.post("/experiments", json=make_spec_data("http-dashboard")).json()["id"])
    assert health == {"status": "ok"}
    assert body["dashboard_link"].startswith("http")
    assert completed["status"] == "completed", completed["error"]
    assert completed["dashboard_link"].startswith("http")
