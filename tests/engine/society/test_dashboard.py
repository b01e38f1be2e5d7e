"""Each experiment on the Dask dashboard: task keys that keep its id (sans-IO), its span on a real
LocalCluster and on an external ``dask scheduler``, and the dashboard page it links."""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from pathlib import Path
from typing import Any

import dask
import httpx
import pytest
from dask.utils import key_split
from distributed import Client
from distributed.utils import key_split_group

from engine.society.run.dashboard import (
    AGENTS,
    ENV_ROUTER,
    FINE_METRICS_PAGE,
    QUESTIONNAIRE,
    cluster_dashboard,
    experiment_page,
    experiment_span,
    key_kind,
    task_key,
    task_prefix,
)
from engine.society.run.runner import run_experiment
from engine.society.run.sweep import run_sweep
from engine.spec import parse_spec
from tests.engine.society import external_cluster as cluster_fixtures
from tests.engine.society.span_ledger import install_ledger, task_spans

external_cluster = cluster_fixtures.external_cluster  # the shared module-scoped fixture, for pytest to find

#: Experiment ids as the service makes them (``uuid4().hex[:12]``), the hex-ish kinds ``key_split`` drops
#: after a ``-`` among them, and run directory names as CLI users choose them.
IDS = [uuid.UUID(int=random.Random(index).getrandbits(128)).hex[:12] for index in range(50)] + [  # fixed: the same ids in every collection
    "deadbeef0001", "123456789012", "abcdefabcdef", "deadbeef", "run", "demo-1", "cli small", "2026-12-01.run",
]


def _spec(name: str = "same-name", *, agents: int = 3, questionnaire: bool = True, sweep: dict | None = None) -> Any:
    steps: list[dict[str, Any]] = [{"type": "run", "num_steps": 1, "tick": 3600}]
    if questionnaire:
        steps.append({"type": "questionnaire", "questionnaire_id": "q",
                      "questions": [{"id": "mood", "prompt": "How do you feel?", "response_type": "text"}]})
    return parse_spec({
        "name": name, "seed": 3, "llm": {"default": {"model": "sim/default"}},
        "population": [{"count": agents, "profile_template": {"name": "Resident {i}"}, "config": {"max_react_turns": 1}}],
        "environment": {"modules": [{"type": "MessagingSpace"}]},
        "steps": steps, "batch_size": 2, "sweep": sweep,
    })


@pytest.mark.parametrize("experiment_id", IDS)
def test_key_split_keeps_the_experiment_id_in_every_kind_of_task_key(experiment_id: str):
    with experiment_span(experiment_id):
        keys = {kind: task_key(kind, "same-name-1a2b3c", 7, "9f8e7d6c", "0003") for kind in (AGENTS, QUESTIONNAIRE, ENV_ROUTER)}
    label = experiment_id.replace("-", "_").replace(" ", "_").replace(".", "_")
    for kind, key in keys.items():
        assert key_split(key) == key_split_group(key) == f"polis_{label}_{kind}"
        assert key_kind(key) == kind
    # The keys before: the id after a "-" is dropped when it holds a digit, a blank, or looks hex.
    if not experiment_id.isalpha() or len(experiment_id) == 8:
        assert experiment_id not in key_split(f"step_agent_batch-{experiment_id}-000007-9f8e7d6c-0003")


def test_two_ids_give_two_prefixes_and_nested_spans_name_keys_by_both_tags():
    prefixes = set()
    for experiment_id in IDS:
        with experiment_span(experiment_id):
            prefixes.add(key_split(task_key(AGENTS, "same-name-aaaaaa", 1)))
    assert len(prefixes) == len(set(IDS))
    with experiment_span("3f2a9c1b7d4e"):
        first = task_key(AGENTS, "same-name-aaaaaa", 1)
    with experiment_span("5e6f7a8b9c0d"):
        second = task_key(AGENTS, "same-name-aaaaaa", 1)
    assert key_split(first) != key_split(second)
    with experiment_span("sweep-7"), experiment_span("cell-0001"):
        cell = task_key(ENV_ROUTER, "x-123456", 2)
    assert key_split(cell) == "polis_sweep_7_cell_0001_env_router"
    assert key_split(task_key(AGENTS, "demo-1a2b3c", 1)) == task_prefix(AGENTS, ("demo-1a2b3c",)) == "polis_demo_1a2b3c_agents"
    assert key_kind("step_agent_batch-x-000001") is None


def _polis_keys(spans: dict[str, tuple[str, ...]], experiment_id: str) -> dict[str, tuple[str, ...]]:
    return {key: name for key, name in spans.items() if key.startswith(f"polis_{experiment_id}_")}


def _execute_prefixes(tag: str, dask_scheduler: Any) -> list[str]:
    """The task prefixes the fine-performance-metrics page charts when filtered by span tag ``tag``."""
    metrics = dask_scheduler.extensions["spans"].merge_by_tags(tag).cumulative_worker_metrics
    return sorted({key[1] for key in metrics if key[0] == "execute"})


async def _wait_for_prefixes(client: Client, tag: str, expected: set[str], timeout_s: float = 120.0) -> list[str]:
    """Worker metrics reach the scheduler with heartbeats (late, on a busy machine): wait until ``expected`` shows under ``tag``."""
    deadline = time.monotonic() + timeout_s
    while True:
        prefixes = await client.run_on_scheduler(_execute_prefixes, tag)
        if expected <= set(prefixes) or time.monotonic() > deadline:
            return prefixes
        await asyncio.sleep(0.5)


async def test_two_concurrent_runs_of_one_spec_each_land_in_their_own_span(dask_client, tmp_path: Path):
    await install_ledger(dask_client)
    ids = ("3f2a9c1b7d4e", "0d1e2f3a4b5c")
    runs = await asyncio.gather(*(run_experiment(_spec(), tmp_path / i, dask_client, experiment_id=i) for i in ids))
    assert [r.status for r in runs] == ["completed"] * 2, [r.error for r in runs]

    spans = await task_spans(dask_client)
    for experiment_id in ids:
        mine = _polis_keys(spans, experiment_id)
        assert {key_kind(key) for key in mine} == {AGENTS, QUESTIONNAIRE, ENV_ROUTER}, mine
        assert set(mine.values()) == {(experiment_id,)}  # the actor, the tick's and the questionnaire's batches
        assert {key_split(key) for key in mine} == {f"polis_{experiment_id}_{kind}" for kind in (AGENTS, QUESTIONNAIRE, ENV_ROUTER)}
        agents = f"polis_{experiment_id}_{AGENTS}"
        assert agents in await _wait_for_prefixes(dask_client, experiment_id, {agents})
    assert {key_split(k) for k in _polis_keys(spans, ids[0])}.isdisjoint(key_split(k) for k in _polis_keys(spans, ids[1]))


def _span_parents(tag: str, dask_scheduler: Any) -> dict[tuple[str, ...], tuple[str, ...] | None]:
    spans = dask_scheduler.extensions["spans"].spans_search_by_tag[tag]
    return {tuple(s.name): tuple(s.parent.name) if s.parent else None for s in spans}


async def test_a_sweeps_cells_run_in_spans_nested_in_the_sweeps_span(dask_client, tmp_path: Path):
    await install_ledger(dask_client)
    sweep_id = "9a8b7c6d5e4f"
    spec = _spec("tiny-sweep", agents=2, questionnaire=False, sweep={"grid": {"population.0.count": [1, 2]}})
    sweep = await run_sweep(spec, tmp_path / "sweep", dask_client, experiment_id=sweep_id)
    assert sweep.statuses() == {"completed": 2}

    cells = {(sweep_id, "cell-0000"), (sweep_id, "cell-0001")}
    mine = _polis_keys(await task_spans(dask_client), sweep_id)
    assert set(mine.values()) == cells
    assert {(name, key_split(key)) for key, name in mine.items() if key_kind(key) == ENV_ROUTER} == {
        (cell, f"polis_{sweep_id}_{cell[1].replace('-', '_')}_{ENV_ROUTER}") for cell in cells
    }
    assert await dask_client.run_on_scheduler(_span_parents, sweep_id) == {(sweep_id,): None, **{cell: (sweep_id,) for cell in cells}}


async def test_the_experiment_page_answers_on_the_clusters_dashboard_and_follows_the_link_template(dask_client):
    page = await experiment_page(dask_client)
    assert page is not None and page == dask_client.dashboard_link.removesuffix("/status") + f"/{FINE_METRICS_PAGE}"
    async with httpx.AsyncClient(timeout=30) as http:
        assert (await http.get(page)).status_code == 200
    port = page.split(":")[2].split("/")[0]
    with dask.config.set({"distributed.dashboard.link": "https://hub.example/user/ada/proxy/{port}/status"}):
        assert await experiment_page(dask_client) == f"https://hub.example/user/ada/proxy/{port}/{FINE_METRICS_PAGE}"
    with dask.config.set({"distributed.dashboard.link": "{scheme}://{host}:{port}/"}):
        assert await experiment_page(dask_client) == f"http://127.0.0.1:{port}/{FINE_METRICS_PAGE}"


async def test_without_a_cluster_there_is_no_dashboard_to_link() -> None:
    assert await cluster_dashboard(None) is None  # an in-process shell's client
    assert await experiment_page(None) is None


async def test_on_an_external_scheduler_without_a_dashboard_a_run_has_its_span_and_no_page(external_cluster, tmp_path: Path):
    experiment_id = "e1f2a3b4c5d6"
    async with Client(external_cluster.address, asynchronous=True) as client:
        assert await experiment_page(client) is None
        await install_ledger(client)
        run = await run_experiment(_spec(agents=2, questionnaire=False), tmp_path / "run", client, experiment_id=experiment_id)
        assert run.status == "completed", run.error
        mine = _polis_keys(await task_spans(client), experiment_id)
    assert {key_kind(key) for key in mine} == {AGENTS, ENV_ROUTER} and set(mine.values()) == {(experiment_id,)}
