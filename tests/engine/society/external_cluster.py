"""A real external Dask cluster for tests: ``dask scheduler`` and ``dask worker`` processes on 127.0.0.1.

Not a LocalCluster: every process is started from the command line, from a directory outside the
repository, in its own process group (so a kill reaches its children and nothing is left behind).

    with ExternalCluster(tmp_path, n_workers=2) as cluster:
        cluster.address                      # tcp://127.0.0.1:PORT
        extra = cluster.start_worker(prefix=["unshare", "--mount", "sh", "-c", 'mount ... && exec "$@"', "sh"])
        cluster.kill_worker(extra)

``external_cluster`` (a module-scoped pytest fixture, imported into a test module) yields one.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import venv
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from engine.settings import THREADS_PER_WORKER

__all__ = ["ExternalCluster", "WorkerProcess", "bare_python", "env_actor_worker", "external_cluster"]

#: The venv's ``dask`` command (the console script next to this interpreter).
DASK = str(Path(sys.executable).parent / "dask")
#: As ``engine.society.run.cluster.CLUSTER_CONFIG``, for processes that read Dask config from the environment.
CLUSTER_ENV = {"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT": "10s"}
_START = re.compile(r"Start worker at:\s+(\S+)")
_REGISTERED = "Registered to:"


@dataclass
class WorkerProcess:
    """One ``dask worker`` process (group) of the cluster."""

    name: str
    process: subprocess.Popen[bytes]
    log: Path
    address: str = ""  #: ``tcp://127.0.0.1:PORT`` once it registered

    def log_tail(self, lines: int = 15) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:]) if self.log.exists() else ""


def _kill_group(process: subprocess.Popen[bytes], grace_s: float = 0.0) -> None:
    """End a process and every process of its group; reap it."""
    if process.poll() is None and grace_s > 0:
        try:
            os.killpg(process.pid, signal.SIGTERM)
            process.wait(timeout=grace_s)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass  # still running (or gone): the SIGKILL below settles it
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # the whole group is gone already
    process.wait(timeout=10)


class ExternalCluster:
    """A scheduler and ``n_workers`` workers (``THREADS_PER_WORKER`` threads each, no nanny by default) on 127.0.0.1.

    Args:
        root: where the scheduler file and the logs go; it is also every process's cwd.
        n_workers: workers started with the cluster.
        nanny: start workers with a nanny (slower to start; a killed worker process is restarted).
        timeout_s: how long a process may take to come up (only bounds a hang: a busy machine starts them slowly).
    """

    def __init__(self, root: Path, *, n_workers: int = 2, nanny: bool = False, timeout_s: float = 120.0) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.n_workers = n_workers
        self.nanny = nanny
        self.timeout_s = timeout_s
        self.scheduler_file = self.root / "scheduler.json"
        self.address = ""
        self.workers: dict[str, WorkerProcess] = {}
        self.startup_s = 0.0  #: how long ``start()`` took
        self._scheduler: subprocess.Popen[bytes] | None = None
        self._count = 0

    def __enter__(self) -> ExternalCluster:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _spawn(self, argv: Sequence[str], log: Path, env: dict[str, str] | None, cwd: Path | None = None) -> subprocess.Popen[bytes]:
        with open(log, "wb") as out:
            return subprocess.Popen(
                list(argv), cwd=cwd or self.root, env={**os.environ, **CLUSTER_ENV, **(env or {})},
                stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )

    def start(self) -> None:
        """Start the scheduler, then the workers in parallel; return once all registered."""
        started = time.perf_counter()
        self.scheduler_file.unlink(missing_ok=True)
        log = self.root / "scheduler.log"
        self._scheduler = self._spawn(
            [DASK, "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(self.scheduler_file)], log, None)
        deadline = time.monotonic() + self.timeout_s
        while not self.address:
            if self._scheduler.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the scheduler did not start:\n{log.read_text(errors='replace')[-2000:]}")
            try:
                self.address = json.loads(self.scheduler_file.read_text())["address"]
            except (FileNotFoundError, json.JSONDecodeError, KeyError):
                time.sleep(0.05)  # not written (completely) yet
        workers = [self.start_worker(wait=False) for _ in range(self.n_workers)]
        for worker in workers:
            self.wait_for(worker)
        self.startup_s = time.perf_counter() - started

    def start_worker(
        self,
        name: str | None = None,
        *,
        prefix: Sequence[str] = (),
        python: str | None = None,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        wait: bool = True,
    ) -> WorkerProcess:
        """Start one more worker; by default return once it registered with the scheduler.

        Args:
            name: the worker's name (default ``w<N>``).
            prefix: a command put before the worker's argv, e.g. ``["unshare", "--mount", "sh", "-c",
                'mount -t tmpfs tmpfs /runs && exec "$@"', "sh"]`` (the worker's argv lands in ``"$@"``).
            python: run ``<python> -m dask worker`` instead of this venv's ``dask worker``.
            env: extra environment variables.
            cwd: its working directory (default the cluster's root).
            wait: wait until it registered (else call :meth:`wait_for`).

        Raises:
            RuntimeError: it exited or did not register in time (with its log's tail).
        """
        self._count += 1
        name = name or f"w{self._count}"
        command = [python, "-m", "dask"] if python else [DASK]
        argv = [*prefix, *command, "worker", self.address, "--name", name, "--nthreads", str(THREADS_PER_WORKER), "--nworkers", "1",
                "--host", "127.0.0.1", "--no-dashboard", *([] if self.nanny else ["--no-nanny"])]
        log = self.root / f"worker-{name}.log"
        worker = WorkerProcess(name, self._spawn(argv, log, env, cwd), log)
        self.workers[name] = worker
        if wait:
            self.wait_for(worker)
        return worker

    def wait_for(self, worker: WorkerProcess) -> str:
        """Wait until ``worker`` registered with the scheduler; return its address."""
        deadline = time.monotonic() + self.timeout_s
        while True:
            text = worker.log.read_text(errors="replace") if worker.log.exists() else ""
            if match := _START.search(text):
                worker.address = match.group(1)
            if worker.address and _REGISTERED in text:
                return worker.address
            if worker.process.poll() is not None or time.monotonic() > deadline:
                self.kill_worker(worker)
                raise RuntimeError(f"worker {worker.name} did not register "
                                   f"(exit code {worker.process.returncode}):\n{worker.log_tail()}")
            time.sleep(0.05)

    def kill_worker(self, worker: WorkerProcess | str) -> None:
        """SIGKILL a worker (by process, name or address) and its process group; forget it."""
        if isinstance(worker, str):
            worker = next(w for w in self.workers.values() if worker in (w.name, w.address))
        _kill_group(worker.process)
        self.workers.pop(worker.name, None)

    def close(self) -> None:
        """Kill every worker, then the scheduler; nothing of the cluster is left running."""
        for worker in list(self.workers.values()):
            self.kill_worker(worker)
        if self._scheduler is not None:
            _kill_group(self._scheduler, grace_s=2.0)
            self._scheduler = None


def bare_python(root: Path) -> str:
    """A Python with Dask but without Polis: a fresh venv that sees this venv's site-packages by a
    ``.pth`` line (nested ``.pth`` files there, among them Polis's editable finder, are not run).

    Returns:
        The new venv's interpreter.
    """
    target = Path(root) / "bare-venv"
    venv.EnvBuilder(with_pip=False, symlinks=True).create(target)
    site = next(p for p in sys.path if p.endswith("site-packages") and Path(p).is_relative_to(sys.prefix))
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    (target / "lib" / version / "site-packages" / "dask-only.pth").write_text(site + "\n")
    return str(target / "bin" / "python")


@pytest.fixture(scope="module")
def external_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExternalCluster]:
    """A scheduler and two workers started with ``dask scheduler`` / ``dask worker``, for the module."""
    with ExternalCluster(tmp_path_factory.mktemp("external-cluster")) as cluster:
        yield cluster


async def env_actor_worker(client: Any) -> str:
    """The address of the worker that holds the run's env actor (the one run of the cluster)."""
    from engine.society.run.dashboard import ENV_ROUTER, key_kind

    who = await client.who_has()
    holders = [addrs for key, addrs in who.items() if key_kind(key) == ENV_ROUTER and addrs]
    assert len(holders) == 1, who
    return str(holders[0][0])
