"""ServiceSettings reads POLIS_* variables once, with safe defaults."""

from __future__ import annotations

from pathlib import Path

import pytest

from service.settings import ServiceSettings


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("POLIS_DATA_DIR", "POLIS_SCHEDULER", "POLIS_N_WORKERS", "POLIS_HOST", "POLIS_PORT"):
        monkeypatch.delenv(name, raising=False)


def test_defaults_listen_on_localhost_and_start_a_local_cluster() -> None:
    settings = ServiceSettings()
    assert settings.host == "127.0.0.1"
    assert settings.port == 8400
    assert settings.scheduler is None
    assert settings.n_workers is None
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
