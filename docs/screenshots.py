"""Take the README's screenshots of the results page: ``docs/report-demo.png`` and ``docs/report-sweep.png``.

Runs the demo (``examples/demo.yaml`` plus a questionnaire) and a 2x2 sweep of it through a real service
on 127.0.0.1 (its own LocalCluster, the simulated LLM), opens each experiment's ``/report`` in headless
Chromium, waits for Bokeh to finish drawing and captures the whole page (DevTools ``Page.captureScreenshot``).

Usage: ``make screenshots`` (or ``PYTHONPATH=. .venv/bin/python docs/screenshots.py [OUT_DIR]``).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from service.settings import ServiceSettings
from tests.engine.results.report_specs import demo_with_questionnaire, sweep_2x2
from tests.service.browser import Browser
from tests.service.live import serve, wait_until_final

DOCS = Path(__file__).resolve().parent


def run(http: httpx.Client, spec: dict[str, Any]) -> str:
    response = http.post("/experiments", json=spec)
    response.raise_for_status()
    final = wait_until_final(http, response.json()["id"], timeout=600)
    if final["status"] != "completed":
        raise SystemExit(f"{spec['name']} ended {final['status']}: {final['error']}")
    return str(final["id"])


async def capture(base_url: str, shots: dict[Path, str], profile: Path) -> None:
    async with Browser.start(profile) as browser:
        for path, experiment_id in shots.items():
            page = await browser.new_page()
            await page.goto(f"{base_url}/experiments/{experiment_id}/report")
            rendered = await page.bokeh_rendered()
            if not rendered["idle"]:
                raise SystemExit(f"the page of {experiment_id} never finished drawing")
            # Show the SQL box answering its example query, and the columns of the first dataset.
            await page.evaluate("""(async () => {
                document.querySelector('details.dataset').open = true;
                document.getElementById('polis-sql-form').requestSubmit();
                for (let i = 0; i < 200 && !document.querySelector('#polis-sql-result table'); i++) {
                  await new Promise((resolve) => setTimeout(resolve, 50));
                } })()""")
            await page.screenshot(path)
            print(f"{path}: {len(rendered['figures'])} plots", file=sys.stderr)


def main(out: Path = DOCS) -> None:
    with tempfile.TemporaryDirectory(prefix="polis-screenshots-") as tmp, serve(
        ServiceSettings(data_dir=Path(tmp) / "data", n_workers=2), startup_timeout=120
    ) as http:
        shots = {out / "report-demo.png": run(http, demo_with_questionnaire()), out / "report-sweep.png": run(http, sweep_2x2())}
        asyncio.run(capture(str(http.base_url), shots, Path(tmp) / "profile"))


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DOCS)
