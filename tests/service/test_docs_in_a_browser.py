"""``/docs`` and ``/redoc`` render in a real headless browser that can reach nothing but 127.0.0.1.

Skipped where no Chromium is installed (Debian: ``apt-get install chromium``).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from service.settings import ServiceSettings
from tests.service.live import serve

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on this machine")


@pytest.fixture(scope="module")
def http(cluster_address: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    with serve(ServiceSettings(data_dir=tmp_path_factory.mktemp("browser"), scheduler=cluster_address)) as client:
        yield client


def rendered(url: str, profile: Path) -> str:
    """The page's DOM after its scripts ran, with every host but loopback unreachable."""
    assert CHROMIUM is not None
    result = subprocess.run(
        [
            CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", f"--user-data-dir={profile}",
            # No network: names other than 127.0.0.1 do not resolve, and anything else goes to a dead proxy.
            "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1", "--proxy-server=http://127.0.0.1:9",
            "--virtual-time-budget=15000", "--dump-dom", url,
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
