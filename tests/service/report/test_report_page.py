"""The page's HTML without a browser: a queued experiment's page, and the served page's live configuration."""

from __future__ import annotations

import json
import re

from engine.results.report import ReportData
from service.report.page import served_page, standalone_page


def _config(html: str) -> dict[str, object]:
    match = re.search(r'<script type="application/json" id="polis-report-config">(.*?)</script>', html, re.S)
    assert match is not None
    config: dict[str, object] = json.loads(match.group(1))
    return config


def test_a_queued_experiments_page_has_its_status_and_no_plots_and_follows_the_events() -> None:
    queued = ReportData(title="later", summary={"status": "queued", "owner": "lab-a"}, errors=(), panels=(), datasets=())
    html = served_page(queued, "0123456789ab", live=True)
    assert "Nothing recorded yet" in html and "bokeh.min.js" not in html
    assert _config(html) == {
        "signature": [], "live": True, "data_url": "/experiments/0123456789ab/report/data",
        "sql_url": "/experiments/0123456789ab/sql", "events_url": "/experiments/0123456789ab/events", "sql_max_rows": 200,
    }
    assert 'id="polis-status">queued<' in html and "lab-a" in html


def test_text_from_the_run_is_escaped() -> None:
    data = ReportData(title="<script>alert(1)</script>", summary={"status": "failed", "error": "<b>boom</b>"},
                      errors=({"source": "agent-step", "error": "<img src=x onerror=alert(1)>"},), panels=(), datasets=())
    for html in (served_page(data, "abc", live=False), standalone_page(data)):
        assert "<script>alert(1)</script>" not in html and "<img src=x" not in html and "<b>boom</b>" not in html
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
