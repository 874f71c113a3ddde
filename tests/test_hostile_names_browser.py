"""Store and URL text is data, never markup: what a real Chromium draws.

One ``streamlit run app.py -- --readonly`` server on 127.0.0.1 over the toy store with hostile
names (``app_fixtures.hostile_names``), whose images point at a tiny HTTP server of this test
on 127.0.0.1 (the "tracking pixel"). Every page is opened as is, and the pages with the most
URL-bound widgets once more with hostile values in every query parameter
(``tests/test_hostile_names.URL_VALUES``; AppTest checks those on every page). On every visit:
no link to the hostile hosts, no ``<img>``, no KaTeX, no Material "warning" icon and no
coloured text from a directive, and no exception. Afterwards the pixel server must have
received no request. Where the names are drawn (a Markdown caption, a Plotly axis), their
characters are on screen as written.
"""

from __future__ import annotations

import urllib.parse
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import pytest

from tests import app_fixtures
from tests.browser_fixtures import (
    browser_marks,
    chromium_context,
    streamlit_app,
)
from tests.engine_fixtures import LocalHTTPServer
from tests.test_hostile_names import URL_VALUES, app_pages

pytestmark = browser_marks(300)

#: A 1x1 transparent PNG: what a tracking pixel serves.
PIXEL_PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


class PixelServer:
    """An HTTP server on 127.0.0.1 that records every request path and answers a PNG."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        seen = self.requests

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                seen.append(self.path)
                self.send_response(200)
                self.send_header("Content-Type", "image/png")
                self.send_header("Content-Length", str(len(PIXEL_PNG)))
                self.end_headers()
                self.wfile.write(PIXEL_PNG)

            def log_message(self, *args: Any) -> None:
                pass

        self.http = LocalHTTPServer(Handler)
        self.base = self.http.base

    def close(self) -> None:
        self.http.close()


@pytest.fixture(scope="module")
def pixel() -> Iterator[PixelServer]:
    server = PixelServer()
    yield server
    server.close()


@pytest.fixture(scope="module")
def server(pixel: PixelServer, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    store = app_fixtures.build_hostile_name_store(
        tmp_path_factory.mktemp("names-browser") / "hostile", pixel.base
    )
    with streamlit_app(["--readonly", "--store", f"hostile={store.path}"]) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium_context(height=1000) as context:
        yield context


#: What the page must not hold: counted in the browser, for one visit.
MARKUP_COUNT = """(hosts) => ({
  links: [...document.querySelectorAll('a')].filter(a => hosts.some(h =>
      (a.getAttribute('href') || a.getAttribute('xlink:href') || '').includes(h))).length,
  images: document.querySelectorAll('img').length,
  katex: document.querySelectorAll('.katex').length,
  warning_icons: document.querySelectorAll('[aria-label="warning icon"]').length,
  coloured_text: document.querySelectorAll('.stMarkdownColoredText').length,
  exceptions: document.querySelectorAll('[data-testid="stException"]').length,
})"""


def visit(browser: Any, url: str) -> Any:
    page = browser.new_page()
    page.goto(url, wait_until="domcontentloaded")
    page.wait_for_selector('[data-testid="stApp"][data-test-connection-state="CONNECTED"]')
    idle = '[data-testid="stApp"][data-test-script-state="notRunning"]'
    page.wait_for_selector(idle, timeout=60_000)
    page.wait_for_timeout(500)  # charts and images would load now
    page.wait_for_selector(idle, timeout=60_000)
    return page


def test_pages_draw_hostile_names_and_url_values_as_text(
    server: str, browser: Any, pixel: PixelServer
) -> None:
    hosts = ["evil.example", pixel.base.removeprefix("http://")]
    hostile_query = urllib.parse.urlencode(
        {k: v.replace(app_fixtures.PIXEL, pixel.base) for k, v in URL_VALUES.items()}
    )
    names = app_fixtures.hostile_names(pixel.base)
    found: dict[str, dict[str, int]] = {}
    texts: dict[str, str] = {}
    ticks: dict[str, list[str]] = {}
    visits = [(Path(path).stem, "store=hostile") for path in app_pages()]
    visits += [(name, hostile_query) for name in ("leaderboard", "inspector", "monitoring")]
    for page_name, query in visits:
        page = visit(browser, f"{server}/{page_name}?{query}")
        try:
            if page_name == "leaderboard" and query == "store=hostile":
                # Plotly draws its axes after the script finished; on a busy machine that takes
                # longer than the settle pause above (the tick list came back empty once).
                page.wait_for_selector(".xtick text", state="attached", timeout=60_000)
            where = f"{page_name}?{query[:30]}"
            found[where] = page.evaluate(MARKUP_COUNT, hosts)
            texts[where] = page.evaluate("document.body.innerText")
            ticks[where] = page.evaluate(
                "[...document.querySelectorAll('.xtick text')].map(t => t.textContent)"
            )
        finally:
            page.close()

    markup = {where: counts for where, counts in found.items() if any(counts.values())}
    assert markup == {}, f"markup from store or URL text in the page: {markup}"
    assert pixel.requests == [], f"the browser fetched the pixel: {pixel.requests}"
    # The names are drawn, as written: a Markdown caption and a Plotly axis of the leaderboard.
    inspector = texts["inspector?store=hostile"].replace("\u2060", "")
    assert names["judge:toy-judge"] in inspector
    assert names["gamma-r1"] in ticks["leaderboard?store=hostile"]
    assert names["beta-large"] in ticks["leaderboard?store=hostile"]
    # The URL values are named in the messages, as written.
    leaderboard = texts[f"leaderboard?{hostile_query[:30]}"].replace("\u2060", "")
    assert f"There is no store called {URL_VALUES['store']!r}" in leaderboard
