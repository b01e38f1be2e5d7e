"""Polis on five hosts: scheduler, two workers, the service and ``polis sim-llm``, each in its own network namespace.

The hosts (``tests/deploy/netns.py``) share a bridge on a private 10.251.x.0/24 and nothing else but
the data folder, bind-mounted into each at a path that is empty outside. Every process is the
venv's own command line (``dask scheduler``, ``dask worker``, ``polis serve``, ``polis sim-llm``),
bound to its host's address; the test submits over REST from the root namespace through the bridge.
A spec whose LLM is ``openai/sim`` at the sim-llm host completes, and a second run, during which one
worker's host is torn down (its processes killed, its veth and namespace deleted), ends with the same
replay rows, workspaces and env state as the clean run.

Skipped, with the reason, when not root or when namespaces cannot be made. Everything the test makes
(namespaces, links, mounts, processes) is removed by the fixture's finalizer, also on failure.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from distributed import Client

from engine.settings import THREADS_PER_WORKER
from engine.storage.reader import ReplayReader
from service.client import PolisClient
from service.schemas import ExperimentDetail
from tests.deploy.netns import Host, NetnsLab, why_no_netns
from tests.engine.llm.local_model_support import why_no_local_model
from tests.engine.society.crash_support import AGENTS, crash_spec, final_state

_WHY_NOT = why_no_netns()
pytestmark = [pytest.mark.skipif(_WHY_NOT is not None, reason=_WHY_NOT or ""), pytest.mark.timeout(300)]

_BIN = Path(sys.executable).parent
_REPO = Path(__file__).resolve().parents[2]
_ENV = {
    "PYTHONPATH": str(_REPO),  # every host imports this checkout (the preflight compares source hashes)
    "DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "10s",
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
}
_SCHEDULER_PORT, _SERVICE_PORT, _LLM_PORT = 8786, 8400, 8000
#: Each LLM answer's delay: long enough that a batch is in flight on the victim when the test looks.
_LLM_LATENCY_MS = 30


def _wait(what: str, ready: Any, lab: NetnsLab, log: str, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not come up in {timeout_s:g} s:\n{lab.log(log)}")
        time.sleep(0.1)


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=1) as response:
            return response.status == 200
    except OSError:
        return False


class Deployment:
    """The five hosts with their processes, and a REST client for the service."""

    def __init__(self, lab: NetnsLab) -> None:
        self.lab = lab
        self.scheduler = lab.add_host("sch")
        self.workers = [lab.add_host("w1"), lab.add_host("w2")]
        self.service = lab.add_host("svc")
        self.llm = lab.add_host("llm")
        self.llm_url = f"http://{self.llm.address}:{_LLM_PORT}/v1"
        self.service_url = f"http://{self.service.address}:{_SERVICE_PORT}"
        self.scheduler_address = f"tcp://{self.scheduler.address}:{_SCHEDULER_PORT}"
        tokens, grants = lab.root / "tokens.json", lab.root / "grants.json"
        made = subprocess.run([str(_BIN / "polis"), "token", "create", "--owner", "lab", "--file", str(tokens)],
                              env={**_ENV, "PATH": str(_BIN)}, capture_output=True, text=True, check=True, timeout=60)
        self.token = made.stdout.strip()
        # A base_url over REST needs a grant: the sim-llm host, and two the workers cannot reach (no key).
        self.unreachable = {"loopback": f"http://127.0.0.1:{_LLM_PORT}/v1",
                            "refused": f"http://{self.service.address}:9/v1"}
        granted = {name: {"base_url": url, "models": ["openai/*"]}
                   for name, url in {"sim": self.llm_url, **self.unreachable}.items()}
        grants.write_text(json.dumps({"credentials": {"*": granted}}))
        self.started = time.perf_counter()
        self._start(tokens, grants)
        self.startup_s = time.perf_counter() - self.started

    def _start(self, tokens: Path, grants: Path) -> None:
        lab, scheduler = self.lab, self.scheduler_address
        lab.spawn(self.scheduler, [str(_BIN / "dask"), "scheduler", "--host", self.scheduler.address,
                                   "--port", str(_SCHEDULER_PORT), "--no-dashboard"], "scheduler", _ENV)
        lab.spawn(self.llm, [str(_BIN / "polis"), "sim-llm", "--host", self.llm.address, "--port", str(_LLM_PORT),
                             "--latency-ms", str(_LLM_LATENCY_MS)],
                  "sim-llm", _ENV)
        for worker in self.workers:
            lab.spawn(worker, [str(_BIN / "dask"), "worker", scheduler, "--host", worker.address, "--name", worker.name,
                               "--nthreads", str(THREADS_PER_WORKER), "--nworkers", "1", "--no-dashboard", "--no-nanny"],
                      f"worker-{worker.name}", _ENV)
        lab.spawn(self.service, [str(_BIN / "polis"), "serve"], "service", {
            **_ENV, "POLIS_HOST": self.service.address, "POLIS_PORT": str(_SERVICE_PORT), "POLIS_SCHEDULER": scheduler,
            "POLIS_DATA_DIR": str(lab.mount_point), "POLIS_AUTH_TOKENS": str(tokens), "POLIS_GRANTS": str(grants),
        })
        for worker in self.workers:
            _wait(f"worker {worker.name}", lambda w=worker: "Registered to:" in lab.log(f"worker-{w.name}", 100_000),
                  lab, f"worker-{worker.name}")
        _wait("polis sim-llm", lambda: _answers(f"http://{self.llm.address}:{_LLM_PORT}/health"), lab, "sim-llm")
        _wait("polis serve", lambda: _answers(f"{self.service_url}/health"), lab, "service")

    def client(self) -> PolisClient:
        return PolisClient(self.service_url, token=self.token)

    def run_dir(self, detail: ExperimentDetail) -> Path:
        """Where the root namespace finds a run: the shared folder, not the (empty) mount point."""
        return self.lab.shared / "runs" / detail.id  # POLIS_DATA_DIR/runs/<id> on the hosts

    def tear_down(self, host: Host) -> None:
        self.lab.remove_host(host)


def _spec(llm_url: str, ticks_after: int = 2) -> dict[str, Any]:
    """The crash tests' spec (people messaging, a questionnaire) over the sim-llm host, on both workers."""
    spec = crash_spec(ticks_before=2, ticks_after=ticks_after)
    spec["llm"] = {"default": {"model": "openai/sim", "base_url": llm_url}}
    spec["max_workers"] = 2
    return spec


@pytest.fixture(scope="module")
def deployment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Deployment]:
    lab = NetnsLab(tmp_path_factory.mktemp("multihost"))
    with lab:
        yield Deployment(lab)
    assert lab.leftovers() == [], "namespaces or links of the test are left"


@pytest.fixture(scope="module")
def clean_run(deployment: Deployment) -> dict[str, Any]:
    with deployment.client() as polis:
        submitted = polis.submit(_spec(deployment.llm_url))
        detail = polis.wait(submitted.id, progress=False, timeout=180)
    return {"detail": detail, "state": final_state(deployment.run_dir(detail))}


def test_a_spec_over_sim_llm_completes_on_five_namespace_hosts(deployment: Deployment, clean_run: dict[str, Any]) -> None:
    detail = clean_run["detail"]
    assert detail.status == "completed", detail.error
    assert detail.progress.agent_steps_done == detail.progress.agent_steps_total == AGENTS * 4
    state = clean_run["state"]
    assert {row["status"] for row in state["actions"]} <= {"finished", "turn_limit"}  # no error rows
    assert sum(row["llm_calls"] for row in state["actions"]) > 0  # the agents called the sim-llm host
    # Outside the namespaces the mount point stays empty: the run lives only in the bind-mounted folder.
    assert list(deployment.lab.mount_point.iterdir()) == []


def test_a_run_survives_a_worker_host_torn_down_mid_run_and_ends_as_the_clean_run(
        deployment: Deployment, clean_run: dict[str, Any]) -> None:
    victim = deployment.workers[1]
    with deployment.client() as polis:
        experiment = polis.submit(_spec(deployment.llm_url)).id
        # Watch the scheduler from the root namespace (over the bridge) to strike while the victim computes.
        with Client(deployment.scheduler_address, timeout=30) as dask:
            victim_address = next(a for a, w in dask.scheduler_info()["workers"].items() if w["name"] == victim.name)
            deadline = time.monotonic() + 120
            while (done := polis.get(experiment).progress.agent_steps_done) < AGENTS + 2 or not dask.processing(
                    workers=[victim_address])[victim_address]:
                assert time.monotonic() < deadline and done < AGENTS * 4, "the victim never held a task in ticks 2-4"
                time.sleep(0.02)
            deployment.tear_down(victim)  # mid-run: kill its processes, delete its veth and namespace
        detail = polis.wait(experiment, progress=False, timeout=180)

    assert detail.status == "completed", detail.error
    assert final_state(deployment.run_dir(detail)) == clean_run["state"]


def test_the_driver_host_on_the_service_host_is_its_bridge_address(deployment: Deployment) -> None:
    script = ("from distributed import Client; from engine.society.run.cluster import driver_host\n"
              f"with Client({deployment.scheduler_address!r}, timeout=30) as c: print('driver_host', driver_host(c))")
    probe = deployment.lab.spawn(deployment.service, [sys.executable, "-c", script], "driver-host", _ENV)
    assert probe.wait(timeout=60) == 0, deployment.lab.log("driver-host")
    assert f"driver_host {deployment.service.address}\n" in deployment.lab.log("driver-host")


@pytest.mark.parametrize(("kind", "cause"), [
    ("loopback", "is on the driver's loopback interface, and this worker"),
    ("refused", "cannot reach LLM role"),
])
def test_the_preflight_refuses_an_llm_url_the_worker_hosts_cannot_reach(
        deployment: Deployment, kind: str, cause: str) -> None:
    url = deployment.unreachable[kind]
    with deployment.client() as polis:
        experiment = polis.submit(_spec(url, ticks_after=1)).id
        detail = polis.wait(experiment, progress=False, timeout=120)

    assert detail.status == "failed"
    error = detail.error or ""
    assert "preflight refused the cluster" in error and url in error and cause in error
    for worker in deployment.workers[:1]:  # the first worker's host stays up for the whole module
        assert f"worker tcp://{worker.address}:" in error


@pytest.mark.slow  # 69 s here: llama.cpp on 2 shared cores
def test_a_local_model_is_served_on_the_service_host_address_and_reached_from_the_worker_hosts(deployment: Deployment) -> None:
    if (why := why_no_local_model()) is not None:
        pytest.skip(why)
    spec = {
        "name": "local-multihost", "seed": 3, "llm": {"default": {"model": "local/smollm2"}},
        "agents": [{"id": i, "profile": {"name": name}, "config": {"max_react_turns": 1, "tools": ["finish"]}}
                   for i, name in enumerate(["Alice", "Bob"])],
        "environment": {"router": "react", "max_router_steps": 1, "modules": [{"type": "MessagingSpace"}]},
        "steps": [{"type": "run", "num_steps": 1, "tick": 600}],
    }
    with deployment.client() as polis:
        detail = polis.wait(polis.submit(spec).id, progress=False, timeout=240)

    assert detail.status in {"completed", "completed_with_errors"}, detail.error
    run = deployment.run_dir(detail)
    # The driver (the service) bound llama.cpp to its own address on the bridge, not to its loopback,
    # and the workers, each in another namespace, passed the preflight's connect and called it.
    served = json.loads((run / "SOCIETY.json").read_text())["llm"]["default"]["base_url"]
    assert served.startswith(f"http://{deployment.service.address}:")
    with ReplayReader(run) as reader:
        calls = reader.query("SELECT status, model FROM llm_calls WHERE caller LIKE 'agent:%'").to_pylist()
    assert calls and {c["model"] for c in calls} == {"openai/smollm2"}
    assert any(c["status"] == "ok" for c in calls)
