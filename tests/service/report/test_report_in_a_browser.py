"""The served results page in headless Chromium, against a real uvicorn: every plot draws, nothing leaves 127.0.0.1.

The demo (with a questionnaire) runs through the REST API on the simulated LLM. The browser can resolve
no host but 127.0.0.1 (``tests.service.browser``), and every request it makes is recorded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import pytest

from engine.cluster_options import IN_PROCESS
from service.settings import ServiceSettings
from tests.engine.results.report_specs import demo_with_questionnaire
from tests.service.browser import Browser, Page, require_chromium
from tests.service.live import serve, wait_until_final

#: Ticks of the run the live-update test watches: long enough to open the page while it runs.
LIVE_TICKS = 16


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    require_chromium()
    with serve(ServiceSettings(data_dir=tmp_path_factory.mktemp("report-browser"), scheduler=IN_PROCESS)) as client:
        yield client


@pytest.fixture(scope="module")
def demo(http: httpx.Client) -> dict[str, Any]:
    response = http.post("/experiments", json=demo_with_questionnaire())
    assert response.status_code == 201, response.text
    final = wait_until_final(http, response.json()["id"])
    assert final["status"] == "completed", final["error"]
    return final


def only_loopback(requests: list[str]) -> list[str]:
    """The requested URLs that went anywhere but 127.0.0.1 (``data:`` and ``about:`` URLs go nowhere)."""
    return [url for url in requests if urlparse(url).scheme not in ("data", "about", "blob")
            and urlparse(url).hostname != "127.0.0.1"]


def assert_every_plot_drew(rendered: dict[str, Any], panels: list[dict[str, Any]]) -> None:
    assert rendered["idle"], "Bokeh never became idle"
    figures = {figure["name"]: figure for figure in rendered["figures"]}
    assert sorted(figures) == sorted(panel["key"] for panel in panels)
    for name, figure in figures.items():
        assert figure["glyphs"] > 0 and figure["finished"], figure
        assert all(rows > 0 for rows in figure["rows"]), (name, figure)


async def open_report(page: Page, http: httpx.Client, experiment_id: str) -> dict[str, Any]:
    await page.goto(f"{http.base_url}/experiments/{experiment_id}/report")
    return await page.bokeh_rendered()


async def test_the_served_page_draws_every_plot_and_requests_only_loopback(http: httpx.Client, demo: dict[str, Any],
                                                                           tmp_path: Path) -> None:
    panels = http.get(f"/experiments/{demo['id']}/report/data").json()["report"]["panels"]
    assert {p["group"] for p in panels} == {"Run", "MessagingSpace", "Questionnaire mood"} and len(panels) >= 9
    async with Browser.start(tmp_path) as browser:
        page = await browser.new_page()
        rendered = await open_report(page, http, demo["id"])
        status = await page.evaluate("document.getElementById('polis-status').textContent")
    assert_every_plot_drew(rendered, panels)
    assert status == "completed"
    assert only_loopback(page.requests) == []
    assert any(urlparse(u).path == "/static/bokeh/static/js/bokeh.min.js" for u in page.requests), page.requests


async def test_the_page_fits_a_1280_pixel_window_with_no_horizontal_scroll(http: httpx.Client, demo: dict[str, Any],
                                                                          tmp_path: Path) -> None:
    async with Browser.start(tmp_path) as browser:
        page = await browser.new_page()
        await page.send("Emulation.setDeviceMetricsOverride", width=1280, height=800, deviceScaleFactor=1, mobile=False)
        await open_report(page, http, demo["id"])
        widths = await page.evaluate("[document.documentElement.scrollWidth, window.innerWidth, "
                                     "Math.max(...[...document.querySelectorAll('.bk-Figure, .bk-GridPlot, table')]"
                                     ".map(e => e.getBoundingClientRect().right))]")
    scroll, window, rightmost = widths
    assert window == 1280 and scroll <= window and rightmost <= window, widths


async def test_the_sql_box_shows_the_services_answer(http: httpx.Client, demo: dict[str, Any], tmp_path: Path) -> None:
    async with Browser.start(tmp_path) as browser:
        page = await browser.new_page()
        await open_report(page, http, demo["id"])
        await page.evaluate("""(() => {
            document.getElementById('polis-sql').value = 'SELECT step, count(*) AS n FROM actions GROUP BY step ORDER BY step';
            document.getElementById('polis-sql-form').requestSubmit(); })()""")
        table = await page.evaluate("""(async () => {
            for (let i = 0; i < 200; i++) {
              const table = document.querySelector('#polis-sql-result table');
              if (table) { return [...table.rows].map((r) => [...r.cells].map((c) => c.textContent)); }
              await new Promise((resolve) => setTimeout(resolve, 50));
            }
            return document.getElementById('polis-sql-status').textContent; })()""")
        await page.evaluate("""(() => { document.getElementById('polis-sql').value = 'COPY actions TO \\'/tmp/x\\'';
            document.getElementById('polis-sql-form').requestSubmit(); })()""")
        refused = await page.evaluate("""(async () => {
            for (let i = 0; i < 200; i++) {
              const text = document.getElementById('polis-sql-status').textContent;
              if (text.startsWith('refused')) { return text; }
              await new Promise((resolve) => setTimeout(resolve, 50));
            }
            return null; })()""")
    assert table == [["step", "n"], ["1", "20"], ["2", "20"], ["3", "20"]]
    assert refused is not None and "SELECT" in refused
    assert any(urlparse(u).path == f"/experiments/{demo['id']}/sql" for u in page.requests)


#: What the page shows of the run: its status and the ticks its tick_duration plot has, or null while it reloads
#: (it builds itself again when a new plot appears) and has no status or plot yet.
SHOWN_JS = """(() => {
  const doc = window.Bokeh && Bokeh.documents[0];
  const source = doc && doc.get_model_by_name('tick_duration/0');
  const status = document.getElementById('polis-status');
  return status && source ? [status.textContent, source.get_length()] : null; })()"""


async def caught_up(page: Page, hang_s: float = 120) -> Any:
    """What the page shows once it shows the completed run with all its ticks (or, after ``hang_s``, what it shows
    then): polled from here, so a reload between two looks (which ends a script running in the page) does no harm."""
    shown: Any = None
    deadline = time.monotonic() + hang_s  # only bounds a hang
    while shown != ["completed", LIVE_TICKS] and time.monotonic() < deadline:
        try:
            shown = await page.evaluate(SHOWN_JS)
        except AssertionError as error:  # the page was reloading: its script context went away mid-look
            shown = f"not readable: {error}"
        await asyncio.sleep(0.1)
    return shown


async def test_the_page_follows_a_running_experiment_to_its_end(http: httpx.Client, tmp_path: Path) -> None:
    spec = demo_with_questionnaire()
    spec["name"] = "live-report"
    spec["steps"] = [{"type": "run", "num_steps": LIVE_TICKS, "tick": 3600}]
    async with Browser.start(tmp_path) as browser:  # chromium starts before the run: under load it takes seconds
        page = await browser.new_page()
        experiment = http.post("/experiments", json=spec).json()
        for _ in range(2400):  # open the page once the first tick is in, while the rest still run (120 s: bounds a hang)
            body = http.get(f"/experiments/{experiment['id']}").json()
            if body["progress"]["ticks_done"] >= 1 or body["status"] not in ("queued", "running"):
                break
            await asyncio.sleep(0.05)
        assert body["status"] == "running", f"the run ended before the page could watch it: {body['status']}"
        first = await open_report(page, http, experiment["id"])
        ticks_at_first = {f["name"]: f["rows"] for f in first["figures"]}["tick_duration"][0]
        final = await asyncio.to_thread(wait_until_final, http, experiment["id"])
        assert final["status"] == "completed", final["error"]
        shown = await caught_up(page)
        rendered = await page.bokeh_rendered()
    assert ticks_at_first < LIVE_TICKS
    assert shown == ["completed", LIVE_TICKS], f"the page did not catch up with the finished run: {shown}"
    assert_every_plot_drew(rendered, http.get(f"/experiments/{experiment['id']}/report/data").json()["report"]["panels"])
    paths = [urlparse(u).path for u in page.requests]
    assert f"/experiments/{experiment['id']}/events" in paths
    assert f"/experiments/{experiment['id']}/report/data" in paths
    assert only_loopback(page.requests) == []


async def test_a_survey_experiments_page_shows_its_fidelity_table_and_real_against_simulated_bars(
        http: httpx.Client, tmp_path: Path) -> None:
    from tests.engine.fidelity.test_rehearsal_run import rehearsal_spec, survey

    posted = http.post("/experiments", json=rehearsal_spec(0.3, survey(120)))
    assert posted.status_code == 201, posted.text
    experiment = posted.json()["id"]
    assert wait_until_final(http, experiment)["status"] == "completed"
    assert http.post(f"/experiments/{experiment}/fidelity", json={"by": ["party"], "bootstrap": 50}).status_code == 200
    panels = http.get(f"/experiments/{experiment}/report/data").json()["report"]["panels"]
    rate = next(p for p in panels if p["key"] == "fidelity.rate")
    # real and simulated side by side, in the scale's order, titled with the question as it was asked
    assert [x[0] for x in rate["lines"][0]["x"]] == ["very poor", "poor", "fair", "good", "very good"]
    assert [line["label"] for line in rate["lines"]] == ["real", "simulated"]
    assert rate["description"] == "How do you rate your marriage?"
    async with Browser.start(tmp_path) as browser:
        page = await browser.new_page()
        rendered = await open_report(page, http, experiment)
        table = await page.evaluate(
            "Array.from(document.querySelectorAll('#polis-fidelity tr')).map(r => Array.from(r.cells).map(c => c.textContent))")
    assert_every_plot_drew(rendered, panels)
    assert table[0] == ["item", "metric", "group", "value", "95% CI", "gap", "n"]
    accuracy = next(row for row in table[1:] if row[:3] == ["rate", "accuracy", "all"])
    low, high = (float(v) for v in accuracy[4].strip("[]").split(", "))
    assert low <= 0.7 <= high  # rehearse_noise 0.3
    assert any(row[2] == "party=left" and row[5].startswith(("+", "-")) for row in table[1:])  # subgroup gaps
    assert only_loopback(page.requests) == []


async def test_a_network_experiments_page_plots_cascades_degrees_and_measures_and_shows_the_fit(
        http: httpx.Client, tmp_path: Path) -> None:
    posted = http.post("/experiments", json={
        "name": "social", "seed": 4, "population": [{"count": 200, "profile_template": {"party": ["left", "right"]}}],
        "llm": {"default": {"model": "sim/social", "extra": {"social": {"post": 0.3, "repost": 0.4, "like": 0.1}}}},
        "network": {"layers": {"follow": {"generate": {"model": "block", "attribute": "party", "mean_degree": 6,
                                                       "homophily": 0.7}, "directed": True}}},
        "environment": {"modules": [{"type": "SocialMediaSpace", "network": {"follows": "follow"}}]},
        "steps": [{"type": "run", "num_steps": 2, "tick": 3600}]})
    assert posted.status_code == 201, posted.text
    experiment = posted.json()["id"]
    assert wait_until_final(http, experiment)["status"] == "completed"
    panels = http.get(f"/experiments/{experiment}/report/data").json()["report"]["panels"]
    network = {p["key"] for p in panels if p["group"] == "Network"}
    assert {"network.cascades", "network.degrees", "network.edges", "network.reciprocity", "network.clustering"} <= network
    async with Browser.start(tmp_path) as browser:
        page = await browser.new_page()
        rendered = await open_report(page, http, experiment)
        table = await page.evaluate(
            "Array.from(document.querySelectorAll('#polis-network-fit tr')).map(r => Array.from(r.cells).map(c => c.textContent))")
    assert_every_plot_drew(rendered, panels)
    assert table[0] == ["layer", "model", "measure", "target", "achieved", ""]
    homophily = next(row for row in table[1:] if row[2] == "coleman_index_pooled")
    assert homophily[:4] == ["follow", "block", "coleman_index_pooled", "0.7"] and abs(float(homophily[4]) - 0.7) < 0.2
    assert only_loopback(page.requests) == []
