"""``/docs`` and ``/redoc`` render in a real headless browser that can reach nothing but 127.0.0.1.

Without Chromium they fail when ``CI=true`` and skip loudly elsewhere (``tests.service.browser.require_chromium``).
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from engine.cluster_options import IN_PROCESS
from service.settings import ServiceSettings
from tests.service.browser import NO_NETWORK_FLAGS, require_chromium
from tests.service.live import serve


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    require_chromium()
    with serve(ServiceSettings(data_dir=tmp_path_factory.mktemp("browser"), scheduler=IN_PROCESS)) as client:
        yield client


def rendered(url: str, profile: Path) -> str:
    """The page's DOM after its scripts ran, with every host but loopback unreachable."""
    result = subprocess.run(
        [
            require_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={profile}",
            *NO_NETWORK_FLAGS, "--virtual-time-budget=15000", "--dump-dom", url,
        ],
        capture_output=True, text=True, timeout=90, check=True,
    )
    return result.stdout


def test_swagger_ui_renders_every_operation_offline(http: httpx.Client, tmp_path: Path) -> None:
    dom = rendered(f"{http.base_url}/docs", tmp_path)
    assert 'class="swagger-ui' in dom
    for operation in ("/experiments/{experiment_id}/cancel", "/metrics"):
        assert operation in dom


def test_redoc_renders_the_api_offline(http: httpx.Client, tmp_path: Path) -> None:
    dom = rendered(f"{http.base_url}/redoc", tmp_path)
    assert "Submit Experiment" in dom
    assert "ErrorBody" in dom or "detail" in dom
