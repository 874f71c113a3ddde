"""Real Chromium: the published snapshot opens offline, and the hosted app shows the viewer's
toolbar.

* ``python -m precompute publish`` (the real CLI) writes a snapshot of the demo store; Chromium
  opens ``index.html`` from ``file://`` with every non-file request aborted by a route (and the
  context offline). The test asserts that no such request was even attempted, that the rank
  table with intervals is there and that Plotly drew both charts.
* The whole demo site, walked from ``index.html`` through every link (teacher, row and trace
  pages, their anchors and downloads), each page opened offline: no request made, every link
  resolves, every page styled by the shared assets, the trace pages drawn, and a row page's
  table sorts when its header is clicked.
* The same on a store with script payloads in every name: no dialog, no injected element, the
  names readable as text.
* ``streamlit run app.py -- --readonly``: no Deploy button, and the main menu has no developer
  entries; the leaderboard of the demo store shows intervals and rank intervals (a screenshot is
  saved under ``test-artifacts/``).
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser_fixtures import CHROMIUM, FLAGS, REPO, browser_marks, streamlit_app
from tests.test_browser import ARTIFACTS, screenshot, wait_idle

pytestmark = browser_marks(600)

LOCAL_SCHEMES = ("file://", "data:", "blob:")


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield browser
        browser.close()


def publish(store: Path, out: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "precompute", "publish", "--store", str(store), "--out", str(out)],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=900,  # a limit on a hung process, not a speed check
    )
    assert result.returncode == 0, result.stderr
    assert (out / "index.html").is_file() and (out / "leaderboard.csv").is_file()


def open_offline(chromium: Any, page_file: Path) -> tuple[Any, Any, list[str], list[str]]:
    """Open ``page_file`` in a fresh offline context; every request that is not to a local
    scheme is recorded and aborted. Returns (context, page, attempted, dialogs)."""
    context = chromium.new_context(offline=True, viewport={"width": 1400, "height": 900})
    attempted: list[str] = []

    def guard(route: Any) -> None:
        url = route.request.url
        if url.startswith(LOCAL_SCHEMES):
            route.continue_()
        else:
            attempted.append(url)
            route.abort()

    context.route("**/*", guard)
    page = context.new_page()
    page.on("request", lambda request: attempted.append(request.url)
            if not request.url.startswith(LOCAL_SCHEMES) else None)  # fmt: skip
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto(page_file.as_uri())
    page.wait_for_selector("#rank-table", timeout=30_000)
    return context, page, attempted, dialogs


def plotted(page: Any, chart_id: str) -> int:
    selector = f"#{chart_id} .scatterlayer .trace"
    page.wait_for_selector(selector, state="attached", timeout=30_000)
    return page.locator(selector).count()


@pytest.fixture(scope="module")
def demo_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site") / "demo"
    publish(REPO / "results" / "demo", out)
    return out


@pytest.fixture(scope="module")
def hostile_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site of a store whose names and texts are script-injection payloads."""
    from tests.xss_payloads import build_hostile_store

    folder = tmp_path_factory.mktemp("hostile")
    out = folder / "site"
    publish(build_hostile_store(folder / "store"), out)
    return out


def test_snapshot_opens_offline_with_intervals(chromium: Any, demo_site: Path) -> None:
    out = demo_site
    context, page, attempted, dialogs = open_offline(chromium, out / "index.html")
    try:
        rows = page.locator("#rank-table tbody tr")
        assert rows.count() == 5  # the demo's five teachers
        headers = page.locator("#rank-table th").all_inner_texts()
        assert headers[:3] == ["teacher", "Accuracy", "Accuracy rank"]
        first = rows.nth(0).locator("td").all_inner_texts()
        # gpt-4-turbo answers 25 of the 50 problems: 50%, the best model accuracy
        assert first[0] == "gpt-4-turbo"
        # value and interval, then n on a line of its own
        # the 2.5th and 97.5th percentiles of 1,000 Poisson-weighted resamples of the problems
        assert first[1].split("\n") == ["50.0% [36.0–64.9]", "n 50"], first[1]
        assert first[2] == "1 (1–2)"
        # the human reference solution: shown last, with its value and interval but no rank
        last = rows.nth(4).locator("td").all_inner_texts()
        assert last[0] == "human" and last[2] == "reference", last
        # 50 of 50: the Wilson interval, lower 50 / (50 + 1.96²) = 0.929, not a collapsed [100–100]
        assert last[1].split("\n") == ["100.0% [92.9–100.0] (Wilson)", "n 50"], last[1]
        # FOTU of palm-2-medium rests on six correct traces: marked low-n
        palm = page.locator("#rank-table tr", has_text="palm-2-medium").locator("td.low-n")
        assert palm.count() >= 1
        assert plotted(page, "transfer-curves") >= 5
        assert plotted(page, "pareto-chart") >= 1
        assert page.locator("#pareto-shares tbody tr").count() == 5
        ARTIFACTS.mkdir(exist_ok=True)
        height = page.evaluate("() => document.body.scrollHeight")
        page.set_viewport_size({"width": 1400, "height": min(int(height) + 40, 8000)})
        page.screenshot(path=str(ARTIFACTS / "snapshot-demo.png"), full_page=True)
        assert attempted == [] and dialogs == []
    finally:
        context.close()


def test_snapshot_of_published_store_says_no_interval(chromium: Any, tmp_path: Path) -> None:
    out = tmp_path / "site"
    publish(REPO / "results" / "published", out)
    context, page, attempted, dialogs = open_offline(chromium, out / "index.html")
    try:
        assert page.locator("#rank-table tbody tr").count() == 12
        cells = page.locator("#rank-table tbody tr").nth(0).locator("td").all_inner_texts()
        assert cells[1].split("\n") == ["82.3%", "published, no interval"], cells[1]
        assert plotted(page, "pareto-chart") >= 1
        assert attempted == [] and dialogs == []
    finally:
        context.close()


def test_snapshot_shows_hostile_names_as_text(chromium: Any, hostile_site: Path) -> None:
    from tests.xss_payloads import INJECTED_SELECTORS, TEACHERS

    context, page, attempted, dialogs = open_offline(chromium, hostile_site / "index.html")
    try:
        plotted(page, "pareto-chart")
        page.wait_for_timeout(500)  # an injected handler would have fired by now
        assert dialogs == []
        for selector in INJECTED_SELECTORS:
            assert page.locator(selector).count() == 0, selector
        names = page.locator("#rank-table tbody td:first-child").all_inner_texts()
        assert sorted(names) == sorted(TEACHERS)
        # the chart labels too: Plotly shows the names as text, not as markup
        labels = page.locator("#pareto-chart .textpoint").all_text_contents()
        assert sorted(labels) == sorted(TEACHERS)
        assert attempted == []
    finally:
        context.close()


@pytest.fixture(scope="module")
def hosted() -> Iterator[str]:
    with streamlit_app(["--readonly"]) as base:
        yield base


def test_readonly_app_has_the_viewer_toolbar(chromium: Any, hosted: str) -> None:
    context = chromium.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    try:
        page.goto(f"{hosted}/leaderboard?store=demo")
        page.wait_for_selector('[data-testid="stApp"]', timeout=30_000)
        wait_idle(page)
        page.wait_for_selector('[data-testid="stDataFrame"]', timeout=30_000)
        assert page.locator('[data-testid="stAppDeployButton"]').count() == 0
        menu = page.locator('[data-testid="stMainMenu"]')
        if menu.count():
            menu.click()
            entries = page.locator('[data-testid="stMainMenuList"]').inner_text()
            page.keyboard.press("Escape")
            assert "Clear cache" not in entries and "Deploy" not in entries, entries
        # the leaderboard itself: interval caption and the rank-interval chart drawn
        assert page.get_by_text("95% interval [lo–hi] from 1,000 resamples").count() == 1
        page.wait_for_selector(".js-plotly-plot .barlayer .trace", timeout=15_000)
        screenshot(page, "leaderboard-intervals-demo")
    finally:
        context.close()


def test_site_walk_every_link_offline(chromium: Any, demo_site: Path) -> None:
    from urllib.parse import unquote, urldefrag, urlparse

    out = demo_site
    context = chromium.new_context(offline=True, viewport={"width": 1400, "height": 900})
    attempted: list[str] = []
    context.route("**/*", lambda route: route.continue_()
                  if route.request.url.startswith(LOCAL_SCHEMES)
                  else (attempted.append(route.request.url), route.abort()))  # fmt: skip
    page = context.new_page()
    page.on("request", lambda request: attempted.append(request.url)
            if not request.url.startswith(LOCAL_SCHEMES) else None)  # fmt: skip
    dialogs: list[str] = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    console_errors: list[str] = []
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)

    def local(url: str) -> Path:
        return Path(unquote(urlparse(url).path))

    start = (out / "index.html").as_uri()
    queue, visited, anchors, others = [start], set(), [], set()
    jumps = 0
    kinds = {"teachers": 0, "rows": 0, "traces": 0}
    try:
        while queue:
            url = queue.pop()
            if url in visited:
                continue
            visited.add(url)
            page.goto(url)
            page.wait_for_load_state("load")
            # the shared style sheet applied (a rule of assets/site.css) and the footer present
            assert (
                page.evaluate(
                    "() => getComputedStyle(document.querySelector('footer')).borderTopStyle"
                )
                == "solid"
            ), url
            folder = local(url).parent.name
            if folder in kinds:
                kinds[folder] += 1
            if folder == "traces":
                assert page.locator(".lv-trace .lv-step").count() >= 1, url
            for href in page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)"):
                assert href.startswith("file://"), (url, href)
                target, fragment = urldefrag(href)
                assert local(target).is_file(), (url, href)
                if fragment and target == url:  # a jump to a matched step on this page
                    assert page.locator(f"[id='{fragment}']").count() == 1, (url, fragment)
                    jumps += 1
                elif fragment:
                    anchors.append((target, fragment))
                if target.endswith(".html"):
                    queue.append(target)
                else:
                    others.add(local(target).name.rsplit(".", 1)[-1])
        # 1 leaderboard, 5 teachers, 25 rows (5 teachers × 5 CHAMP categories), 250 traces
        assert len(visited) == 281 and kinds == {"teachers": 5, "rows": 25, "traces": 250}
        assert others == {"csv", "tex", "json"}
        assert jumps > 0  # the trace pages' ↩ links to matched steps were followed
        for target, fragment in anchors:  # jumps into another page (none on the demo)
            page.goto(target)
            assert page.locator(f"[id='{fragment}']").count() == 1, (target, fragment)
        # a row page's table sorts by a clicked header (tokens, ascending then descending)
        row = next((out / "rows").glob("gpt-4--champ-sequence--*.html"))
        page.goto(row.as_uri())
        header = page.locator("#trace-table th", has_text="tokens").first
        column = page.locator("#trace-table th").all_inner_texts().index("tokens")
        cells = f"#trace-table tbody tr td:nth-child({column + 1})"
        header.click()
        ascending = [float(t) for t in page.locator(cells).all_inner_texts()]
        assert ascending == sorted(ascending) and len(ascending) == 10
        header.click()
        assert [float(t) for t in page.locator(cells).all_inner_texts()] == ascending[::-1]
        assert attempted == [] and dialogs == [] and console_errors == []
    finally:
        context.close()


def test_hostile_trace_pages_show_text_not_markup(chromium: Any, hostile_site: Path) -> None:
    from tests.xss_payloads import INJECTED_SELECTORS, PAYLOADS

    out = hostile_site
    pages = sorted((out / "traces").glob("*.html")) + sorted((out / "rows").glob("*.html"))
    pages += sorted((out / "teachers").glob("*.html"))
    assert pages
    context = chromium.new_context(offline=True)
    dialogs: list[str] = []
    try:
        page = context.new_page()
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        shown = ""
        for file in pages:
            page.goto(file.as_uri())
            page.wait_for_timeout(100)
            for selector in INJECTED_SELECTORS:
                assert page.locator(selector).count() == 0, (file.name, selector)
            shown += page.inner_text("body")
        assert dialogs == []
        # the payloads are on the pages as readable text
        assert PAYLOADS["script"] in shown and PAYLOADS["img_onerror"] in shown
    finally:
        context.close()
