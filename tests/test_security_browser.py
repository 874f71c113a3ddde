"""The app in a real Chromium, fed a store whose every text field is hostile (tests/xss_payloads).

One ``streamlit run app.py -- --readonly --store hostile=PATH`` server on 127.0.0.1 for the
module. Every page of the app is opened; on each: no dialog fires, ``window.__xss`` stays unset,
none of the elements only an injected payload would create exists, and no exception is shown.
The Trace inspector shows the payloads as visible text. Hostile query parameters (unknown
values, 10 kB values, paths) give a friendly message and never show a file's contents.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser_fixtures import (
    REPO,
    browser_marks,
    chromium_context,
    streamlit_app,
)
from tests.xss_payloads import INJECTED_SELECTORS, PAYLOADS, build_hostile_store

pytestmark = browser_marks(300)


def app_pages() -> list[str]:
    """The url paths of every page registered in app.py."""
    paths = re.findall(r'url_path="([^"]+)"', (REPO / "app.py").read_text(encoding="utf-8"))
    assert paths, "no pages found in app.py"
    return paths


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {
        str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns)
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def hostile_store() -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="legival-hostile-"))
    yield build_hostile_store(folder / "hostile")
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def server(hostile_store: Path) -> Iterator[str]:
    before = _snapshot(hostile_store)
    with streamlit_app(["--readonly", "--store", f"hostile={hostile_store}"]) as base:
        yield base
    assert _snapshot(hostile_store) == before, "the read-only app changed the store"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium_context(height=1000) as context:
        yield context


class Visit:
    """A page of the app opened in the browser, with everything that fired while it ran."""

    def __init__(self, browser: Any, url: str):
        self.dialogs: list[str] = []
        self.page = browser.new_page()
        self.page.on("dialog", self._dialog)
        self.page.goto(url, wait_until="domcontentloaded")
        self.wait_idle()

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def wait_idle(self) -> None:
        app = '[data-testid="stApp"][data-test-connection-state="CONNECTED"]'
        self.page.wait_for_selector(app, timeout=60_000)
        idle = '[data-testid="stApp"][data-test-script-state="notRunning"]'
        self.page.wait_for_selector(idle, timeout=60_000)
        self.page.wait_for_timeout(600)  # charts and HTML blocks settle
        self.page.wait_for_selector(idle, timeout=60_000)

    def text(self) -> str:
        return str(self.page.evaluate("document.body.innerText"))

    def assert_inert(self, where: str) -> None:
        assert self.dialogs == [], f"{where}: a payload opened a dialog: {self.dialogs}"
        assert self.page.evaluate("window.__xss === undefined"), f"{where}: window.__xss set"
        for selector in INJECTED_SELECTORS:
            count = self.page.locator(selector).count()
            assert count == 0, f"{where}: {count} injected element(s) match {selector}"
        inline = self.page.evaluate(
            "[...document.querySelectorAll('script')].filter(s => /alert|__xss/.test("
            "s.textContent)).length"
        )
        assert inline == 0, f"{where}: a <script> with a payload is in the DOM"
        hidden = self.page.evaluate("getComputedStyle(document.body).display")
        assert hidden != "none", f"{where}: an injected <style> hid the page"
        assert self.page.locator('[data-testid="stException"]').count() == 0, where

    def close(self) -> None:
        self.page.close()


def test_the_checks_catch_a_real_injection(browser: Any) -> None:
    """The detectors themselves: raw payload HTML in a page trips every kind of check."""
    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    try:
        page.set_content(
            f"<body>{PAYLOADS['img_onerror']}{PAYLOADS['svg_onload']}{PAYLOADS['a_js']}"
            f"{PAYLOADS['close_div']}</body>"
        )
        page.wait_for_timeout(300)
        assert dialogs, "an onerror/onload payload should have opened a dialog"
        assert page.evaluate("window.__xss") == "close_div"
        found = [s for s in INJECTED_SELECTORS if page.locator(s).count()]
        assert {"img[src='x']", "[onerror]", "svg[onload]", "a[href^='javascript']"} <= set(found)
    finally:
        page.close()


@pytest.mark.parametrize("path", app_pages())
def test_page_shows_hostile_text_inertly(server: str, browser: Any, path: str) -> None:
    visit = Visit(browser, f"{server}/{path}?store=hostile")
    try:
        visit.assert_inert(path)
        # Let slow widgets (dataframes, charts) finish and check once more.
        visit.page.wait_for_timeout(800)
        visit.assert_inert(path)
    finally:
        visit.close()


def test_inspector_shows_payloads_as_text(server: str, browser: Any) -> None:
    visit = Visit(browser, f"{server}/inspector?store=hostile")
    try:
        # The steps arrive after the page's first idle on a loaded machine: wait for them (an
        # event, not a delay) before reading the text.
        visit.page.wait_for_selector("#lv-main .lv-step", state="attached", timeout=60_000)
        visit.wait_idle()
        visit.assert_inert("inspector")
        text = visit.text()
        shown = [name for name, payload in PAYLOADS.items() if payload.strip() in text]
        # The reasoning of the shown trace holds six payloads: the literal markup is on screen.
        assert len(shown) >= 3, f"payloads not visible as text: {text[:2000]}"
        assert any(p in text for p in ("<script>", "<img src=x", "<svg onload"))
    finally:
        visit.close()


# The AppTest versions of these (tests/test_readonly.py) also check which files were opened.
HOSTILE_QUERIES = [
    "store=../../etc/passwd",
    "store=file:///etc/passwd",
    "store=" + "x" * 10_000,
    "teacher=../../etc/passwd&dataset=%2Fetc%2Fpasswd",
    "trace=" + urllib.parse.quote(PAYLOADS["script"]) + "&student=" + "y" * 10_000,
]


@pytest.mark.parametrize("query", HOSTILE_QUERIES, ids=range(len(HOSTILE_QUERIES)))
def test_hostile_query_parameters_are_refused_politely(
    server: str, browser: Any, query: str
) -> None:
    page = "inspector" if query.startswith("trace=") else "leaderboard"
    visit = Visit(browser, f"{server}/{page}?{query}")
    try:
        visit.assert_inert(f"{page}?{query[:40]}")
        text = visit.text()
        assert "root:x:0:0" not in text  # no file's content leaked onto the page
        if query.startswith("store="):
            assert "There is no store called" in text
            assert "x" * 100 not in text  # a 10 kB value is cut short in the message
    finally:
        visit.close()
