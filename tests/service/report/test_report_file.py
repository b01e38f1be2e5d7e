"""``polis report RUN_DIR -o report.html``: one standalone file that draws every plot offline from file://.

"No external URL" is checked where a page loads from: its markup (every tag attribute, every CSS rule)
holds no http(s) URL. The inlined BokehJS bundle contains URL strings (licence comments, a MathJax CDN
loader used only for TeX labels); the test pins those to the shipped bundle's text, and the browser's
request log shows that the page fetches nothing but its own file.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest
from bokeh.util.paths import bokehjs_path

from engine.results.report import load_report
from polis.cli import main
from tests.engine.results.test_report_data import demo_run, sweep_root  # noqa: F401 (module-scoped run fixtures)
from tests.service.browser import Browser

#: An http(s) or protocol-relative URL.
URL = re.compile(r"""(?:https?:)?//[A-Za-z0-9.-]+\.[A-Za-z]{2,}[^\s"'<>)]*""", re.IGNORECASE)
BOKEH_JS = (Path(bokehjs_path()) / "js" / "bokeh.min.js").read_text(encoding="utf-8")


class _Markup(HTMLParser):
    """Splits a page into its markup's resource places (attributes, CSS) and its script bodies."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.resources: list[str] = []  #: every attribute value and every piece of CSS
        self.scripts: list[str] = []
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.resources += [value for _, value in attrs if value]
        self._in = tag if tag in ("script", "style") else None

    def handle_endtag(self, tag: str) -> None:
        self._in = None

    def handle_data(self, data: str) -> None:
        if self._in == "script":
            self.scripts.append(data)
        elif self._in == "style":
            self.resources.append(data)


def resource_urls(html: str) -> list[str]:
    """The http(s) URLs in the page's markup: any tag attribute (``src``, ``href``, ...) and any CSS."""
    markup = _Markup()
    markup.feed(html)
    return [url for place in markup.resources for url in URL.findall(place)]


def script_urls(html: str) -> list[str]:
    """The http(s) URLs inside the page's scripts (BokehJS's licence comments and its unused MathJax loader)."""
    markup = _Markup()
    markup.feed(html)
    return [url for script in markup.scripts for url in URL.findall(script)]


def test_the_resource_url_check_catches_what_it_should() -> None:
    assert resource_urls('<script src="https://cdn.bokeh.org/bokeh.js"></script>')
    assert resource_urls("<link rel=stylesheet href='//fonts.example.com/x.css'>")
    assert resource_urls("<style>body { background: url(http://x.example.org/y.png) }</style>")
    assert resource_urls('<img src="http://example.org/a.png">')
    assert not resource_urls("<script>/* licence: see https://github.com/bokeh/bokeh */ let a = 1;</script>")


@pytest.mark.parametrize("which", ["run", "sweep"])
async def test_the_report_file_draws_every_plot_from_file_urls_only(which: str, demo_run: Path, sweep_root: Path,  # noqa: F811
                                                                    tmp_path: Path) -> None:
    source = demo_run if which == "run" else sweep_root
    out = tmp_path / "report.html"
    assert main(["report", str(source), "-o", str(out)]) == 0
    html = out.read_text(encoding="utf-8")
    # No resource URL in the markup; the only URLs at all are strings inside the shipped BokehJS bundle
    # (licence comments, and the MathJax loader of TeX labels, which this page has none of: the
    # browser's request log below shows that nothing is fetched).
    assert resource_urls(html) == []
    assert "<script src=" not in html  # BokehJS is inline
    assert all(url in BOKEH_JS for url in script_urls(html)), [u for u in script_urls(html) if u not in BOKEH_JS]
    async with Browser.start(tmp_path / "profile") as browser:
        page = await browser.new_page()
        await page.goto(out.as_uri())
        rendered = await page.bokeh_rendered()
    assert rendered["idle"]
    keys = [panel.key for panel in load_report(source).panels]
    assert sorted(f["name"] for f in rendered["figures"]) == sorted(keys) and len(keys) >= 8
    assert all(f["glyphs"] > 0 and f["finished"] and all(n > 0 for n in f["rows"]) for f in rendered["figures"])
    assert page.requests == [out.as_uri()]


def test_polis_report_refuses_a_directory_without_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", str(tmp_path), "-o", str(tmp_path / "r.html")]) == 2
    assert "is not a run directory or a sweep root" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()
