"""Drive Debian's headless Chromium through the DevTools protocol, with no network but 127.0.0.1.

:data:`CHROMIUM` is the browser found on this machine (or None); :func:`require_chromium` fails a test
when ``CI=true`` and there is none, and skips it loudly elsewhere. :class:`Browser` starts one headless
Chromium (``--remote-debugging-port=0``: it prints its websocket URL on stderr), opens pages in it, and
records the URL of every request a page makes (``Network.requestWillBeSent``). Host names other than
127.0.0.1 do not resolve and other traffic goes to a dead proxy, so a page that reached out would
fail to load its resources as well as be caught in :attr:`Page.requests`.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

__all__ = ["BOKEH_RENDERED_JS", "CHROMIUM", "INSTALL_HINT", "NO_NETWORK_FLAGS", "Browser", "Page", "require_chromium"]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
#: How to get the browser on Debian (``make test`` does it when it runs as root).
INSTALL_HINT = "apt-get update && apt-get install -y chromium"
#: No network: names other than 127.0.0.1 do not resolve, and anything else goes to a dead proxy.
NO_NETWORK_FLAGS = ("--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1", "--proxy-server=http://127.0.0.1:9")

#: Resolves once every Bokeh document on the page is idle (every root view has finished drawing, as the
#: Dask dashboard's tests wait for) and reports each figure: its title, its glyph renderers, whether they
#: finished and their data lengths. Resolves ``{"idle": false}`` after ``timeout_ms``.
BOKEH_RENDERED_JS = """
async (timeout_ms) => {
  const deadline = Date.now() + timeout_ms;
  while (Date.now() < deadline) {
    const docs = window.Bokeh ? Bokeh.documents : [];
    if (docs.length > 0 && docs.every((d) => d.is_idle)) {
      const figures = [...Bokeh.index.all_views()].filter((v) => v.model.type === "Figure");
      return {idle: true, figures: figures.map((f) => {
        const glyphs = [...f.renderer_views.values()].filter((r) => r.model.type === "GlyphRenderer");
        return {title: f.model.title ? f.model.title.text : "", name: f.model.name, glyphs: glyphs.length,
                finished: glyphs.every((g) => g.has_finished()),
                rows: glyphs.map((g) => g.model.data_source.get_length())};
      })};
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  return {idle: false};
}
"""


def require_chromium() -> str:
    """The browser's path; fails the test in CI (``CI=true``) when there is none, else skips it loudly."""
    if CHROMIUM is not None:
        return CHROMIUM
    message = f"no Chromium on this machine; install it with: {INSTALL_HINT}"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {message}")
    pytest.skip(f"SKIPPED, NOT RUN: {message}")


class Page:
    """One tab, attached through the browser's websocket with a flat session."""

    def __init__(self, browser: Browser, session_id: str) -> None:
        self._browser = browser
        self.session_id = session_id
        #: Every URL the page requested, in order.
        self.requests: list[str] = []
        self._loaded = asyncio.Event()

    async def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one DevTools command to this tab and return its result."""
        return await self._browser.send(method, session_id=self.session_id, **params)

    def _on_event(self, method: str, params: dict[str, Any]) -> None:
        if method == "Network.requestWillBeSent":
            self.requests.append(params["request"]["url"])
        elif method == "Page.loadEventFired":
            self._loaded.set()

    async def goto(self, url: str, timeout: float = 60.0) -> None:
        """Navigate and wait for the load event."""
        self._loaded.clear()
        await self.send("Page.navigate", url=url)
        await asyncio.wait_for(self._loaded.wait(), timeout)

    async def evaluate(self, expression: str) -> Any:
        """Evaluate JavaScript (awaiting a promise) and return its JSON value.

        Raises:
            AssertionError: the script threw.
        """
        result = await self.send("Runtime.evaluate", expression=expression, awaitPromise=True, returnByValue=True)
        assert "exceptionDetails" not in result, result["exceptionDetails"]
        return result["result"].get("value")

    async def bokeh_rendered(self, timeout_ms: int = 90_000) -> dict[str, Any]:
        """Wait until the page's Bokeh documents are idle; report each figure (see :data:`BOKEH_RENDERED_JS`).
        The timeout only bounds a hang (a busy machine draws slowly), within the 120 s any browser call may take."""
        value: dict[str, Any] = await self.evaluate(f"({BOKEH_RENDERED_JS})({int(timeout_ms)})")
        return value

    async def screenshot(self, path: Path, width: int = 1400) -> None:
        """Save a PNG of the whole page (every section, not just the viewport)."""
        await self.send("Emulation.setDeviceMetricsOverride", width=width, height=900, deviceScaleFactor=1, mobile=False)
        metrics = await self.send("Page.getLayoutMetrics")
        height = int(metrics["cssContentSize"]["height"])
        await self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)
        await asyncio.sleep(0.5)  # Bokeh re-lays out its canvases at the new size
        await self.bokeh_rendered()
        shot = await self.send("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        path.write_bytes(base64.b64decode(shot["data"]))


class Browser:
    """One headless Chromium with no network but loopback; use ``async with Browser.start(profile) as b``."""

    def __init__(self, process: subprocess.Popen[bytes], ws: aiohttp.ClientWebSocketResponse) -> None:
        self._process = process
        self._ws = ws
        self._ids = itertools.count(1)
        self._pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._pages: dict[str, Page] = {}
        self._reader = asyncio.create_task(self._read())

    @classmethod
    @contextlib.asynccontextmanager
    async def start(cls, profile: Path) -> AsyncIterator[Browser]:
        """Start the browser with a fresh profile directory; it is killed on exit."""
        args = [require_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--remote-debugging-port=0", f"--user-data-dir={profile}", *NO_NETWORK_FLAGS, "about:blank"]
        process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        assert process.stderr is not None
        drain: threading.Thread | None = None
        try:
            url = await asyncio.wait_for(asyncio.to_thread(_devtools_url, process), 60)
            # Keep reading its log so that a full pipe never blocks the browser.
            drain = threading.Thread(target=process.stderr.read, name="chromium-stderr", daemon=True)
            drain.start()
            async with aiohttp.ClientSession() as http, http.ws_connect(url, max_msg_size=0) as ws:
                browser = cls(process, ws)
                try:
                    yield browser
                finally:
                    await ws.close()  # ends the reader's loop
                    await browser._reader
        finally:
            process.kill()
            process.wait(timeout=30)
            if drain is not None:
                drain.join(timeout=30)
            process.stderr.close()

    async def _read(self) -> None:
        async for message in self._ws:
            data = json.loads(message.data)
            if "id" in data and data["id"] in self._pending:
                future = self._pending.pop(data["id"])
                if "error" in data:
                    future.set_exception(AssertionError(f"DevTools error: {data['error']}"))
                else:
                    future.set_result(data.get("result", {}))
            elif "method" in data and data.get("sessionId") in self._pages:
                self._pages[data["sessionId"]]._on_event(data["method"], data.get("params", {}))

    async def send(self, method: str, session_id: str | None = None, **params: Any) -> dict[str, Any]:
        """Send one DevTools command (to a tab's session, or to the browser) and return its result."""
        ident = next(self._ids)
        future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
        self._pending[ident] = future
        message: dict[str, Any] = {"id": ident, "method": method, "params": params}
        if session_id is not None:
            message["sessionId"] = session_id
        await self._ws.send_str(json.dumps(message))
        return await asyncio.wait_for(future, 120)

    async def new_page(self) -> Page:
        """Open a blank tab that records its requests."""
        target = await self.send("Target.createTarget", url="about:blank")
        attached = await self.send("Target.attachToTarget", targetId=target["targetId"], flatten=True)
        page = Page(self, attached["sessionId"])
        self._pages[page.session_id] = page
        await page.send("Page.enable")
        await page.send("Network.enable")
        await page.send("Runtime.enable")
        return page


def _devtools_url(process: subprocess.Popen[bytes]) -> str:
    assert process.stderr is not None
    for raw in process.stderr:
        line = raw.decode(errors="replace")
        if match := re.search(r"DevTools listening on (ws://\S+)", line):
            return match.group(1)
    raise RuntimeError(f"Chromium exited ({process.wait()}) without printing its DevTools URL")
