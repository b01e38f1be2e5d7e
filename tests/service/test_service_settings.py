"""ServiceSettings reads POLIS_* variables once, with safe defaults: the engine's settings tree, extended."""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from engine.settings import THREADS_PER_WORKER, EngineSettings
from service.settings import ServiceSettings

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [n for n in os.environ if n.startswith("POLIS_")]:
        monkeypatch.delenv(name)


def test_defaults_listen_on_localhost_and_start_a_local_cluster() -> None:
    settings = ServiceSettings()
    assert settings.host == "127.0.0.1"
    assert settings.port == 8400
    assert settings.scheduler is None
    assert settings.n_workers is None
    assert settings.threads_per_worker == THREADS_PER_WORKER == 2
    assert settings.data_dir == Path.home() / ".local/share/polis"


def test_environment_variables_with_polis_prefix_are_read(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("POLIS_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("POLIS_SCHEDULER", "tcp://127.0.0.1:8786")
    monkeypatch.setenv("POLIS_N_WORKERS", "3")
    monkeypatch.setenv("POLIS_PORT", "9000")
    settings = ServiceSettings()
    assert settings.data_dir == tmp_path
    assert settings.scheduler == "tcp://127.0.0.1:8786"
    assert settings.n_workers == 3
    assert settings.port == 9000


def test_empty_scheduler_means_local_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLIS_SCHEDULER", "")
    assert ServiceSettings().scheduler is None


def test_data_dir_expands_the_home_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLIS_DATA_DIR", "~/polis-data")
    assert ServiceSettings().data_dir == Path.home() / "polis-data"


def test_unprefixed_variables_are_ignored(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PORT", "1234")
    assert ServiceSettings().port == 8400


def test_the_service_reads_the_engine_variables_the_cli_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLIS_DASHBOARD_ADDRESS", "127.0.0.1:9999")
    monkeypatch.setenv("POLIS_LLM_CONCURRENCY", "3")
    monkeypatch.setenv("POLIS_QUERY_THREADS", "1")
    settings = ServiceSettings()
    assert isinstance(settings, EngineSettings)
    assert settings.dashboard_address == EngineSettings().dashboard_address == "127.0.0.1:9999"
    assert settings.limiter_config() == EngineSettings().limiter_config()
    assert settings.limiter_config().concurrency == 3
    assert settings.query_limits().threads == 1


def test_the_cli_reads_an_empty_scheduler_as_a_local_cluster_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLIS_SCHEDULER", "")
    assert EngineSettings().scheduler is None


#: Read straight from os.environ on purpose (see engine/settings.py): test-only fault injection.
_OUTSIDE_THE_TREE = {"POLIS_FAILPOINTS", "POLIS_FAILPOINT_PGID"}


def test_every_polis_variable_named_in_engine_or_service_is_a_setting() -> None:
    named = {
        match for d in ("engine", "service") for path in (ROOT / d).rglob("*.py")
        for match in re.findall(r"POLIS_[A-Z][A-Z0-9_]*[A-Z0-9](?![A-Z0-9_*])", path.read_text(encoding="utf-8"))
    }
    assert {"POLIS_DASHBOARD_ADDRESS", "POLIS_HOME", "POLIS_INPUT_DIRS"} <= named  # the scan sees them
    fields = {f"POLIS_{name.upper()}" for name in ServiceSettings.model_fields} | {
        field.validation_alias for field in ServiceSettings.model_fields.values() if isinstance(field.validation_alias, str)
    }  # an alias (POLIS_GRANTS for grants_file) is the variable's name
    assert named - _OUTSIDE_THE_TREE <= fields, sorted(named - _OUTSIDE_THE_TREE - fields)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_polis_serve_starts_its_local_cluster_as_the_polis_variables_say(tmp_path: Path) -> None:
    port, dashboard = _free_port(), _free_port()
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("POLIS_")},
           "POLIS_DASHBOARD_ADDRESS": f"127.0.0.1:{dashboard}", "POLIS_N_WORKERS": "1", "POLIS_THREADS_PER_WORKER": "3"}
    process = subprocess.Popen(
        [sys.executable, "-m", "polis.cli", "serve", "--port", str(port), "--data-dir", str(tmp_path)],
        env=env, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 120  # only bounds a hang: it starts its own cluster, slowly on a busy machine
        while True:
            assert process.poll() is None, process.stderr.read() if process.stderr else ""
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).raise_for_status()
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "polis serve did not answer within 120 s"
                time.sleep(0.2)
        cluster = httpx.get(f"http://127.0.0.1:{port}/cluster", timeout=30).json()
        assert cluster["dashboard_link"] == f"http://127.0.0.1:{dashboard}/status"
        assert httpx.get(cluster["dashboard_link"], timeout=30).status_code == 200
        identity = httpx.get(f"http://127.0.0.1:{dashboard}/json/identity.json", timeout=30).json()
        assert [worker["nthreads"] for worker in identity["workers"].values()] == [3]
    finally:
        process.terminate()
        process.communicate(timeout=60)
