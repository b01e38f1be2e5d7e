"""Whole runs kept in object storage: a real S3-protocol server (moto's, on 127.0.0.1) and a real external
cluster (``dask scheduler`` + two ``dask worker`` processes), each worker in a working and temp directory of
its own, with nothing of the run on any local disk. The doors are the users': ``polis run --run-dir s3://...``
with ``POLIS_SCHEDULER``, and ``run_experiment`` on a Client of that scheduler. A fork and the service keep
their runs in the bucket in-process: what they add to the store's path does not depend on where batches run.

Credentials and the endpoint come from the standard AWS environment of each process, never from a spec.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from distributed import Client

from engine.failpoints import arm
from engine.society.fork.run import fork_experiment
from engine.society.run.runner import run_experiment
from engine.spec import parse_spec
from engine.storage.reader import ReplayReader
from engine.storage.run_layout import SOCIETY_STEP_FILE, run_store
from tests.engine.society.crash_support import AGENTS, QUESTIONS, crash_spec, final_state, write_spec
from tests.engine.society.external_cluster import ExternalCluster, env_actor_worker
from tests.s3 import TEST_CREDENTIALS, make_bucket, moto_server

BUCKET = "polis-e2e"
#: What a worker may leave in its own folders: Dask's scratch space and its log; never run data.
RUN_DATA_SUFFIXES = (".parquet", ".jsonl", ".pack", ".llmpack", ".staged", "SOCIETY.json", "SOCIETY_STEP.json", "LEASE.json")


@pytest.fixture(scope="module")
def s3_env() -> Iterator[dict[str, str]]:
    """The moto server's AWS environment, also set in this process (the driver of in-process runs reads it)."""
    with moto_server() as endpoint:
        make_bucket(endpoint, BUCKET)
        env = {**TEST_CREDENTIALS, "AWS_ENDPOINT_URL": endpoint, "AWS_MAX_ATTEMPTS": "2"}
        saved = {key: os.environ.get(key) for key in env}
        os.environ.update(env)
        try:
            yield env
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def _own_dirs(root: Path, name: str) -> tuple[Path, dict[str, str]]:
    home = root / name
    (home / "tmp").mkdir(parents=True)
    return home, {"TMPDIR": str(home / "tmp")}


@pytest.fixture(scope="module")
def s3_cluster(tmp_path_factory: pytest.TempPathFactory, s3_env: dict[str, str]) -> Iterator[ExternalCluster]:
    root = tmp_path_factory.mktemp("s3-cluster")
    with ExternalCluster(root, n_workers=0) as cluster:
        for name in ("w1", "w2"):
            start_own_worker(cluster, name, s3_env)
        yield cluster


def start_own_worker(cluster: ExternalCluster, name: str, env: dict[str, str]) -> None:
    home, temp = _own_dirs(cluster.root, name)
    cluster.start_worker(name, env={**env, **temp}, cwd=home)


def run_data_on_disk(*roots: Path) -> list[str]:
    return [str(p) for root in roots for p in root.rglob("*") if p.is_file() and p.name.endswith(RUN_DATA_SUFFIXES)]


def polis(cluster: ExternalCluster, cwd: Path, *args: str, failpoints: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "POLIS_SCHEDULER": cluster.address, "POLIS_DASHBOARD_ADDRESS": "127.0.0.1:0"}
    env.pop("POLIS_FAILPOINTS", None)
    if failpoints:
        env["POLIS_FAILPOINTS"] = failpoints
    cwd.mkdir(parents=True, exist_ok=True)
    return subprocess.run([sys.executable, "-m", "engine.cli", *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=cwd, start_new_session=True)


def once_per_tick(url: str) -> list[dict]:
    with ReplayReader(url) as reader:
        return reader.query("SELECT agent_id, step, count(*) AS n FROM actions GROUP BY ALL ORDER BY ALL").to_pylist()


@pytest.fixture(scope="module")
def reference(s3_cluster: ExternalCluster, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, subprocess.CompletedProcess[str], Path]:
    """One uninterrupted ``polis run`` into the bucket: what the crash tests must end like, and the fork's parent."""
    home = tmp_path_factory.mktemp("reference")
    url = f"s3://{BUCKET}/runs/reference"
    run = polis(s3_cluster, home / "driver", "run", str(write_spec(home / "spec.yaml", crash_spec(storage="packed"))), "--run-dir", url)
    return url, run, home


def test_polis_run_on_s3_completes_with_every_row_and_nothing_on_local_disk(s3_cluster, reference):
    url, run, home = reference
    driver = home / "driver"
    assert run.returncode == 0, run.stdout + run.stderr[-3000:]
    assert "status: completed\n" in run.stdout and "errors: 0" in run.stdout

    rows = once_per_tick(url)
    assert len(rows) == AGENTS * 3 and {r["n"] for r in rows} == {1}
    with ReplayReader(url) as reader:
        assert reader.count("questionnaire_answers") == AGENTS * QUESTIONS
        assert reader.query("SELECT count(*) AS n FROM spans WHERE name = 'tick'").column("n")[0].as_py() == 3
    keys = run_store(url).list_prefix("")
    assert not [k for k in keys if ".staged-" in k], "a staged key survived the commit"
    assert any(k.startswith("packs/") for k in keys) and any(k.startswith("llm_cache/") for k in keys)
    # The run lives in the bucket only: no worker's folders and not the driver's hold any of it.
    assert run_data_on_disk(s3_cluster.root, home) == []

    status = polis(s3_cluster, driver, "status", url)
    assert status.returncode == 0 and "status: completed" in status.stdout, status.stdout + status.stderr
    query = polis(s3_cluster, driver, "query", url, "SELECT count(*) AS n FROM actions")
    assert query.returncode == 0 and str(AGENTS * 3) in query.stdout, query.stdout + query.stderr
    export = polis(s3_cluster, driver, "workspace", "export", url, "2", str(home / "agent-2"), "--at-step", "1")
    assert export.returncode == 0 and (home / "agent-2" / "AGENT.json").is_file(), export.stdout + export.stderr


def test_a_driver_killed_mid_tick_resumes_to_the_same_end_as_an_uninterrupted_run(s3_cluster, reference, tmp_path):
    spec = write_spec(tmp_path / "spec.yaml", crash_spec(storage="packed"))
    crashed = f"s3://{BUCKET}/runs/crashed"

    # The driver dies (SIGKILL) after tick 2's first batch: the workers are the cluster's and live on.
    killed = polis(s3_cluster, tmp_path / "driver", "run", str(spec), "--run-dir", crashed,
                   failpoints="between_batches:step=2:kill=self")
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr[-3000:]
    assert run_store(crashed).get_json(SOCIETY_STEP_FILE)["step_count"] == 1
    with ReplayReader(crashed) as reader:  # readers see committed transactions only
        assert reader.count("actions") == AGENTS

    resumed = polis(s3_cluster, tmp_path / "driver", "run", "--resume", crashed)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr[-3000:]
    assert not [k for k in run_store(crashed).list_prefix("") if ".staged-" in k]
    state, expected = final_state(crashed), final_state(reference[0])
    assert len(state["actions"]) == AGENTS * 3
    for key in ("actions", "answers", "messaging", "env", "workspaces", "ticks", "completed_steps"):
        assert state[key] == expected[key], key


async def test_a_worker_killed_mid_tick_leaves_every_agent_stepped_once(s3_cluster, s3_env, reference):
    spec = parse_spec(crash_spec(storage="packed"))
    run = f"s3://{BUCKET}/runs/worker-kill"
    async with Client(s3_cluster.address, asynchronous=True) as client:
        task = asyncio.get_running_loop().create_task(run_experiment(spec, run, client))
        while not await asyncio.to_thread(run_store(run).exists, SOCIETY_STEP_FILE):
            await asyncio.sleep(0.05)
        actor = await env_actor_worker(client)
        victim = next(address for address in await client.run(os.getpid) if address != actor)
        await client.run(arm, "mid_batch:step=2:kill=self", workers=[victim])
        summary = await task
        remaining = set(await client.run(os.getpid))
    start_own_worker(s3_cluster, f"w{len(s3_cluster.workers) + 3}", s3_env)  # two workers again for the next tests
    assert victim not in remaining, "the failpoint never killed the worker"
    assert summary.status == "completed", summary.error
    assert summary.replayed + summary.rolled_back >= 1, summary
    state, expected = final_state(run), final_state(reference[0])
    assert len({(r["agent_id"], r["step"]) for r in state["actions"]}) == len(state["actions"]) == AGENTS * 3
    for key in ("actions", "answers", "messaging", "env", "workspaces"):
        assert state[key] == expected[key], key


async def test_a_fork_at_tick_1_in_the_bucket_replays_the_shared_past_without_provider_calls(reference, shell):
    parent, child = reference[0], f"s3://{BUCKET}/runs/fork-child"
    made, summary = await fork_experiment(parent, 1, child, shell)
    assert summary.status == "completed", summary.error
    assert made.agents == AGENTS and made.workspace_bytes > 0
    assert final_state(child) == final_state(parent)  # rows, workspaces, env state
    with ReplayReader(child) as reader:  # the fork's ticks replay the parent's answers from the copied cache
        assert reader.query("SELECT count(*) AS n FROM llm_calls WHERE step > 1 AND NOT cached").column("n")[0].as_py() == 0
        assert reader.query("SELECT count(*) AS n FROM llm_calls WHERE step > 1").column("n")[0].as_py() > 0
    assert run_store(child).get_json("SOCIETY.json")["fork"]["parent"] == parent


def test_a_worker_that_cannot_reach_the_bucket_is_named_before_tick_0(s3_cluster, s3_env, tmp_path):
    url = f"s3://{BUCKET}/runs/blind"
    # Its endpoint is a closed port: the credentials are right, the store is out of reach.
    blind_env = {**s3_env, "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_MAX_ATTEMPTS": "1"}
    home, temp = _own_dirs(s3_cluster.root, "blind")
    blind = s3_cluster.start_worker("blind", env={**blind_env, **temp}, cwd=home)
    try:
        run = polis(s3_cluster, tmp_path / "driver", "run", str(write_spec(tmp_path / "spec.yaml", crash_spec(storage="packed"))),
                    "--run-dir", url)
    finally:
        s3_cluster.kill_worker(blind)
    assert run.returncode == 1, run.stdout + run.stderr[-3000:]
    assert "preflight refused the cluster" in run.stdout and blind.address in run.stdout
    assert f"cannot reach the run's store {url}" in run.stdout
    keys = run_store(url).list_prefix("")
    assert not [k for k in keys if k.startswith(("packs/", "replay/", "workspaces/")) or k == SOCIETY_STEP_FILE], keys


@pytest.mark.parametrize(("url", "says"), [
    (f"s3://{BUCKET}-missing/runs/r", f"store s3://{BUCKET}-missing/runs/r is unavailable"),
    ("nosuch://bucket/runs/r", "unknown storage scheme 'nosuch'"),
])
def test_a_store_that_cannot_be_used_fails_naming_its_url_and_nothing_is_written(s3_cluster, tmp_path, url, says):
    run = polis(s3_cluster, tmp_path / "driver", "run", str(write_spec(tmp_path / "spec.yaml", crash_spec(storage="packed"))),
                "--run-dir", url)
    assert run.returncode != 0
    assert says in run.stdout + run.stderr, run.stdout + run.stderr[-3000:]
    assert list((tmp_path / "driver").iterdir()) == []


def test_the_service_keeps_runs_in_the_bucket_and_serves_them(s3_env, tmp_path):
    from engine.cluster_options import IN_PROCESS
    from service.settings import ServiceSettings
    from tests.service.live import serve, wait_until_final

    settings = ServiceSettings(data_dir=tmp_path / "data", scheduler=IN_PROCESS, run_store=f"s3://{BUCKET}/service")
    spec = {**crash_spec(storage="packed", ticks_before=1, ticks_after=1), "name": "in-the-bucket"}
    with serve(settings) as http:
        posted = http.post("/experiments", json=spec)
        assert posted.status_code == 201, posted.text
        experiment = posted.json()["id"]
        assert wait_until_final(http, experiment, timeout=240)["status"] == "completed"
        url = f"s3://{BUCKET}/service/{experiment}"
        assert run_store(url).exists(SOCIETY_STEP_FILE)

        datasets = {d["name"]: d["rows"] for d in http.get(f"/experiments/{experiment}/datasets").json()["datasets"]}
        assert datasets["actions"] == AGENTS * 2 and datasets["questionnaire_answers"] == AGENTS * QUESTIONS
        download = http.get(f"/experiments/{experiment}/datasets/actions.parquet")
        assert download.status_code == 200 and download.content.startswith(b"PAR1")
        sql = http.post(f"/experiments/{experiment}/sql", json={"sql": "SELECT count(DISTINCT agent_id) AS n FROM actions"})
        assert sql.status_code == 200 and sql.json()["rows"] == [[AGENTS]], sql.text
        files = http.get(f"/experiments/{experiment}/agents/0/files")
        assert files.status_code == 200 and "AGENT.json" in [f["path"] for f in files.json()["files"]], files.text
        assert http.get(f"/experiments/{experiment}/agents/0/files/AGENT.json", params={"step": 1}).status_code == 200
        report = http.get(f"/experiments/{experiment}/report")
        assert report.status_code == 200 and "in-the-bucket" in report.text

        forked = http.post(f"/experiments/{experiment}/fork", json={"at_step": 1})
        assert forked.status_code == 201, forked.text
        assert wait_until_final(http, forked.json()["id"], timeout=240)["status"] == "completed"
        assert run_store(f"s3://{BUCKET}/service/{forked.json()['id']}").get_json("SOCIETY.json")["fork"]["parent"] == url

        assert http.delete(f"/experiments/{experiment}").status_code == 204
        assert run_store(url).list_prefix("") == []
    assert run_data_on_disk(tmp_path) == []  # the data directory holds the records only
