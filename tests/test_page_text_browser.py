"""What a reader sees on every page of the bundled demo, in real Chromium, in both modes.

Every page is opened from its own address (``/leaderboard`` included: it is the address the
page declares) under ``streamlit run app.py`` and, a second time, under ``--readonly``. The page's
visible text (``innerText``, which includes the data grids' accessible cells and headers) must
hold none of the artefacts of a computation a reader should never have to decode: ``None``,
``NaN``, ``Infinity``, ``-0.000`` or a snake_case column header; and no address may open behind
Streamlit's "Page not found" dialog. A full-page screenshot of each visit goes to
``test-artifacts/``.

A data grid draws its cells on a canvas; its accessible cells, read here, hold an empty string
where the canvas draws ``None`` for a null. ``tests/test_grid_cells.py`` therefore checks the
frames every page hands to its grids.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from legival_core.views.app_config import BUNDLED_STORES
from tests.browser_fixtures import (
    browser_marks,
    chromium_context,
    streamlit_app,
)
from tests.test_browser import screenshot, wait_idle

pytestmark = browser_marks(1800)  # 13 pages x 2 modes on a shared 2-core machine: minutes each

#: The address of every page in the menu (app.py's url_path values).
PAGES = (
    "leaderboard", "transfer", "pareto", "correlations", "redundancy", "robustness",
    "decomposition", "inspector", "rewards", "monitoring", "published", "metric_validity",
    "about",
)  # fmt: skip
#: Words that are an artefact, not a value (whole words, so "Nonetheless" does not count).
ARTEFACTS = re.compile(r"(?<![\w-])(None|NaN|nan|-?Infinity|-0\.0+)(?![\w.])")
#: A column header that is a field name: lower-case words joined by underscores.
SNAKE_CASE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)+$")

#: The visible text of the main area, and the headers of every data grid on the page.
PAGE_TEXT = """() => {
  const main = document.querySelector('[data-testid="stMain"]');
  const headers = Array.from(main.querySelectorAll(
    '[data-testid="stDataFrame"] [role="columnheader"], [data-testid="stTable"] th'
  )).map(h => h.innerText.trim()).filter(Boolean);
  const cells = Array.from(main.querySelectorAll(
    '[data-testid="stDataFrame"] [role="gridcell"], [data-testid="stTable"] td'
  )).map(c => c.innerText.trim());
  return {text: main.innerText, headers: headers, cells: cells,
          grids: main.querySelectorAll('[data-testid="stDataFrame"]').length};
}"""


def artefacts_of(shown: dict[str, Any]) -> list[str]:
    """Everything on the page a reader should not see: artefact words and snake_case headers."""
    found = [f"text: {m.group(0)!r}" for m in ARTEFACTS.finditer(shown["text"])]
    found += [f"cell: {c!r}" for c in shown["cells"] if ARTEFACTS.search(c)]
    found += [f"header: {h!r}" for h in shown["headers"] if SNAKE_CASE.match(h)]
    return found


def test_the_artefact_check_catches_what_it_is_for() -> None:
    # the check itself, on text the old pages showed
    old = {"text": "FOTU 0.252 None -Infinity", "cells": ["-0.000", "NaN"],
           "headers": ["fotu_before_leak", "teacher", "n traces"]}  # fmt: skip
    assert artefacts_of(old) == [
        "text: 'None'", "text: '-Infinity'", "cell: '-0.000'", "cell: 'NaN'",
        "header: 'fotu_before_leak'",
    ]  # fmt: skip
    fine = {"text": "Nonetheless 0.000 · n 4 · −0.25", "cells": ["—", "24.0%"], "headers": ["FOTU"]}
    assert artefacts_of(fine) == []


@pytest.fixture(scope="module", params=["normal", "readonly"])
def demo_server(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    if not (BUNDLED_STORES["demo"] / "manifest.json").exists():
        pytest.fail("the bundled demo store is missing (python -m precompute demo builds it)")
    arguments = ["--readonly"] if request.param == "readonly" else []
    with streamlit_app(arguments) as base:
        yield request.param, base


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium_context() as context:
        yield context


def test_every_demo_page_reads_clean(demo_server: tuple[str, str], browser: Any) -> None:
    mode, base = demo_server
    problems: dict[str, list[str]] = {}
    for name in PAGES:
        tab = browser.new_page()
        try:
            tab.goto(f"{base}/{name}?store=demo")
            tab.wait_for_selector('[data-testid="stApp"]', timeout=60_000)
            # the shared test machine is slow: a page's first run may take a minute
            wait_idle(tab, timeout=150_000)
            # Page not found: Streamlit's modal over the default page
            if tab.get_by_text("Page not found").count():
                problems.setdefault(name, []).append("opens behind 'Page not found'")
            tab.wait_for_timeout(500)  # the data grids fill their cells after the run
            shown = tab.evaluate(PAGE_TEXT)
            found = artefacts_of(shown)
            if found:
                problems.setdefault(name, []).extend(found[:8])
            screenshot(tab, f"demo-{mode}-{name}")
        finally:
            tab.close()
    assert not problems, problems


def test_leaderboard_is_a_working_address(browser: Any) -> None:
    """``/leaderboard`` with query parameters, opened after another page of the same server (a
    session that has run ``st.navigation``), shows the leaderboard at that address, with no
    "Page not found" dialog; ``/`` forwards there with its parameters."""
    with streamlit_app([]) as base:
        tab = browser.new_page()
        try:
            for url in ("/about", "/leaderboard?metric=accuracy", "/?metric=tokens"):
                tab.goto(f"{base}{url}")
                tab.wait_for_selector('[data-testid="stApp"]', timeout=60_000)
                wait_idle(tab, timeout=150_000)
                tab.wait_for_timeout(1000)  # the dialog opens after the run
                assert tab.get_by_text("Page not found").count() == 0, url
            assert "/leaderboard?" in tab.url and "metric=tokens" in tab.url
            assert tab.get_by_role("heading", name="🏆 Leaderboard").count() == 1
        finally:
            tab.close()
