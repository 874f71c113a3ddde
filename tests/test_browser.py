"""Real-browser tests: the app served by ``streamlit run`` and driven by Debian's Chromium.

One server for the module, on 127.0.0.1, showing a small store built by the real code. Each
test opens a page, interacts, checks that Plotly drew, and saves a full-page screenshot under
``test-artifacts/``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from tests.browser_fixtures import (
    REPO,
    browser_marks,
    chromium_context,
    streamlit_app,
)

ARTIFACTS = REPO / "test-artifacts"

pytestmark = browser_marks(120)


@pytest.fixture(scope="module")
def toy_store(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from tests.app_fixtures import add_oversight_tables, build_store

    store = build_store(tmp_path_factory.mktemp("browser") / "toy")
    add_oversight_tables(store)  # rewards, sabotaged copies and monitor verdicts
    return store


@pytest.fixture(scope="module")
def server(toy_store: Any) -> Iterator[str]:
    with streamlit_app(["--store", f"toy={toy_store.path}"]) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium_context() as context:
        yield context


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    tab = browser.new_page()
    dialogs: list[str] = []
    tab.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    tab.dialogs = dialogs
    yield tab
    tab.close()


def wait_idle(page: Any, timeout: float = 30_000) -> None:
    page.wait_for_selector(
        '[data-testid="stApp"][data-test-connection-state="CONNECTED"]'
        '[data-test-script-state="notRunning"]',
        timeout=timeout,
    )
    page.wait_for_timeout(300)  # let Plotly finish drawing
    page.wait_for_selector(
        '[data-testid="stApp"][data-test-script-state="notRunning"]', timeout=timeout
    )


def open_page(page: Any, url: str) -> None:
    page.goto(url)
    page.wait_for_selector('[data-testid="stApp"]', timeout=30_000)
    wait_idle(page)


def drawn(page: Any, selector: str, at_least: int = 1) -> int:
    """How many ``selector`` elements Plotly drew, once there are ``at_least`` of them (or
    15 s have passed). Plotly draws after the script run ends, chart by chart, and only once a
    chart scrolls into view, so the charts are scrolled into view while waiting; counting as
    soon as the first appeared raced the second chart of a page."""
    page.wait_for_selector(selector, state="attached", timeout=15_000)
    locator = page.locator(selector)
    deadline = time.monotonic() + 15
    while locator.count() < at_least and time.monotonic() < deadline:
        charts = page.locator('[data-testid="stPlotlyChart"]')
        for index in range(charts.count()):
            charts.nth(index).scroll_into_view_if_needed()
        page.wait_for_timeout(250)
    return locator.count()


def screenshot(page: Any, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    height = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": 1400, "height": max(900, min(int(height) + 40, 8000))})
    page.wait_for_timeout(400)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    page.set_viewport_size({"width": 1400, "height": 900})
    return path


def choose(page: Any, label: str, option: str) -> None:
    """Pick ``option`` in the selectbox labelled ``label``."""
    page.get_by_role("combobox", name=label, exact=True).click()
    page.get_by_role("option", name=option, exact=True).click()


#: teacher -> bar height of the first chart, as the browser holds it.
PLOTTED_BARS = """() => {
  // _fullData holds the decoded arrays (data[0] keeps Plotly's base64 typed-array form)
  const data = document.querySelector('.js-plotly-plot')._fullData[0];
  return Object.fromEntries(Array.from(data.x).map((x, i) => [x, Number(data.y[i])]));
}"""


def test_leaderboard_filters_and_draws(page: Any, server: str, toy_store: Any) -> None:
    """The bars are the stored FOTU: the mean over the two datasets, then the one chosen."""
    board = toy_store.read("teacher_metrics")
    open_page(page, f"{server}/leaderboard?store=toy&metric=fotu")
    page.wait_for_selector('[data-testid="stDataFrame"]')
    assert drawn(page, ".js-plotly-plot .trace") >= 1
    everything = board.groupby("teacher")["fotu"].mean()
    assert page.evaluate(PLOTTED_BARS) == pytest.approx(everything.to_dict())
    choose(page, "Dataset", "toy-math")
    page.wait_for_function("() => window.location.search.includes('dataset=toy-math')")
    wait_idle(page)
    assert "dataset=toy-math" in page.url and "store=toy" in page.url
    math = board[board["dataset"] == "toy-math"].set_index("teacher")["fotu"]
    # Plotly redraws after the script run ends: wait until the bars hold the filtered values
    # (a filter that changed nothing times out here).
    page.wait_for_function(
        f"(want) => {{ const got = ({PLOTTED_BARS})(); return Object.keys(want).every("
        "t => Math.abs(got[t] - want[t]) < 1e-9) && Object.keys(got).length === "
        "Object.keys(want).length; }",
        arg=math.to_dict(),
        timeout=15_000,
    )
    assert page.evaluate(PLOTTED_BARS) == pytest.approx(math.to_dict())
    assert not math.equals(everything.loc[math.index])  # the filter changes what is drawn
    screenshot(page, "leaderboard")


#: Per grid on the page: [width of its content, width it is given, its right edge].
GRID_WIDTHS = """() => Array.from(document.querySelectorAll('[data-testid="stDataFrame"]')).map(
  grid => { const scroller = grid.querySelector('.dvn-scroller');
            return [scroller.scrollWidth, scroller.clientWidth,
                    grid.getBoundingClientRect().right]; })"""


@pytest.fixture(scope="module")
def demo_server() -> Iterator[str]:
    with streamlit_app([]) as base:  # the bundled demo, with its leak warning and models.csv
        yield base


def test_the_demo_board_fits_a_1400_pixel_window(page: Any, demo_server: str) -> None:
    """Issue 39, item 6: at 1400 px the demo's rank table was 1,807 px of content in a 938 px
    grid, so FOTU before leak, the column the leak warning points to, was off screen. Its
    default columns (FOTU with its rank and Δ, FOTU before leak: value, interval, n and
    coverage in each cell) now fit without a horizontal scroll."""
    page.set_viewport_size({"width": 1400, "height": 900})
    open_page(page, f"{demo_server}/leaderboard")
    page.wait_for_selector('[data-testid="stDataFrame"] .dvn-scroller')
    content, given, right = page.evaluate(GRID_WIDTHS)[0]
    screenshot(page, "leaderboard_first_screen")
    assert content <= given + 1, (content, given)
    assert right <= 1400, right


def test_the_csv_download_carries_the_models_facts_of_the_rows_shown(
    page: Any, demo_server: str
) -> None:
    """Issue 42, item 4: the demo's models.csv facts travel with the board's CSV, for the
    rows the filters keep (here the family, from the link)."""
    import csv
    import io

    open_page(page, f"{demo_server}/leaderboard?family=Google")
    button = page.locator('[data-testid="stDownloadButton"]').filter(has_text="Download CSV")
    with page.expect_download(timeout=30_000) as arrived:
        button.first.click()
    rows = list(csv.DictReader(io.StringIO(Path(arrived.value.path()).read_text("utf-8"))))
    assert [row["teacher"] for row in rows] == ["palm-2-medium"]
    assert rows[0]["family"] == "Google" and rows[0]["open_weights"] == "False"
    assert rows[0]["link"] == "https://arxiv.org/abs/2305.10403"


def test_a_deferred_csv_download_arrives_in_the_browser(
    page: Any, server: str, toy_store: Any
) -> None:
    """The CSV exports are made when the button is clicked (Streamlit calls the page's
    function then): the served file is the leaderboard's numbers, one row per teacher."""
    import csv
    import io

    open_page(page, f"{server}/leaderboard?store=toy&metric=fotu")
    button = page.locator('[data-testid="stDownloadButton"]').filter(has_text="Download CSV")
    with page.expect_download(timeout=30_000) as arrived:
        button.first.click()
    path = arrived.value.path()
    assert arrived.value.suggested_filename == "leaderboard.csv"
    rows = list(csv.DictReader(io.StringIO(Path(path).read_text(encoding="utf-8"))))
    teachers = set(toy_store.read("teacher_metrics")["teacher"].astype(str))
    assert rows and {row["teacher"] for row in rows} == teachers


def test_transfer_curves_draw_bands_and_hazards(page: Any, server: str) -> None:
    open_page(page, f"{server}/transfer?store=toy&student=stu-tiny")
    # the curves, the strip of measured bins, the hazards
    assert drawn(page, ".js-plotly-plot", at_least=3) == 3
    assert drawn(page, ".js-plotly-plot .scatterlayer .trace", at_least=6) >= 6  # bands, lines
    # per teacher, a never-solved bar on the left panel and the positions on the right
    assert drawn(page, ".js-plotly-plot .barlayer .trace", at_least=6) == 6
    screenshot(page, "transfer")


def test_pareto_and_correlations(page: Any, server: str) -> None:
    open_page(page, f"{server}/pareto?store=toy&x=tokens&y=fotu")
    assert drawn(page, ".js-plotly-plot .scatterlayer .trace", at_least=2) >= 2
    assert page.get_by_text("On the frontier: alpha-mini").count() == 1
    screenshot(page, "pareto")
    open_page(page, f"{server}/correlations?store=toy")
    # model level, three teachers: every ρ rests on 3 points, so only the faded layer draws
    assert drawn(page, ".js-plotly-plot .heatmaplayer .hm") == 1
    screenshot(page, "correlations")


def test_redundancy_threshold_sweep(page: Any, server: str, toy_store: Any) -> None:
    """One line per teacher of the dataset, drawn, with the store's τ as a dotted line."""
    traces = toy_store.read("traces", columns=["teacher", "dataset"])
    teachers = traces.loc[traces["dataset"] == "toy-logic", "teacher"].nunique()
    open_page(page, f"{server}/redundancy?store=toy&dataset=toy-logic")
    assert drawn(page, ".js-plotly-plot .scatterlayer .trace", at_least=teachers) == teachers
    assert page.locator('.js-plotly-plot .shapelayer path[style*="dasharray"]').count() == 1
    assert page.get_by_text("Page not found").count() == 0
    screenshot(page, "redundancy")


def test_decomposition_waterfall(page: Any, server: str) -> None:
    open_page(page, f"{server}/decomposition?store=toy&dataset=toy-math&layer=solver")
    page.get_by_text("Δlog waterfall").scroll_into_view_if_needed()
    assert drawn(page, ".js-plotly-plot .waterfalllayer .trace") == 1
    screenshot(page, "decomposition")


def test_the_old_efficiency_address_opens_the_decomposition_page(page: Any, toy_store: Any) -> None:
    """The decomposition page was at /efficiency until it was renamed: a bookmark of that
    address lands on /decomposition with its query parameters (Streamlit alone would show the
    leaderboard behind a "Page not found" dialog). On a server of its own, so that the bookmark
    is its first visit: until a run has called st.navigation the browser knows the pages by
    the files in pages/, and a function page there opened behind that dialog all the same."""
    with streamlit_app(["--store", f"toy={toy_store.path}"]) as server:
        _open_old_efficiency_address(page, server)


def _open_old_efficiency_address(page: Any, server: str) -> None:
    open_page(page, f"{server}/efficiency?store=toy&dataset=toy-math&layer=solver")
    page.wait_for_url(re.compile(r"/decomposition\?"), timeout=30_000)
    wait_idle(page)
    query = parse_qs(urlparse(page.url).query)
    assert query["dataset"] == ["toy-math"] and query["layer"] == ["solver"], query
    assert page.get_by_role("heading", name="Efficiency decomposition").count() == 1
    assert page.get_by_text("Page not found").count() == 0
    page.get_by_text("Δlog waterfall").scroll_into_view_if_needed()
    assert drawn(page, ".js-plotly-plot .waterfalllayer .trace") == 1


def test_inspector_shows_hostile_text_as_text(page: Any, server: str) -> None:
    from legival_core.store.schema import trace_id_for
    from tests.app_fixtures import XSS_TRACE

    trace_id = trace_id_for(*XSS_TRACE)
    open_page(page, f"{server}/inspector?store=toy&trace={trace_id}&compare=alpha-mini")
    page.wait_for_selector(".lv-trace")
    text = page.locator("#lv-main").inner_text()
    assert "<script>alert(1)</script>" in text and "<img src=x onerror=alert(1)>" in text
    assert page.locator(".lv-trace script, .lv-trace img").count() == 0
    assert page.locator("#lv-compare").count() == 1
    # the jump link moves to the matched step
    page.locator("#lv-main a.lv-jump").first.click()
    page.wait_for_timeout(300)
    assert not page.dialogs
    screenshot(page, "inspector")


def test_published_about_and_store_kept_across_pages(page: Any, server: str) -> None:
    open_page(page, f"{server}/published?store=toy")
    assert drawn(page, ".js-plotly-plot .barlayer .trace", at_least=3) == 3
    screenshot(page, "published")
    page.get_by_role("link", name="About").click()
    page.wait_for_url("**/about**")
    wait_idle(page)
    assert page.get_by_text("Store 'toy'").count() == 1
    screenshot(page, "about")


def test_reward_and_monitoring_pages(page: Any, server: str) -> None:
    open_page(page, f"{server}/rewards?store=toy")
    assert drawn(page, ".js-plotly-plot .scatterlayer .trace") >= 1
    assert page.get_by_text("Spearman ρ of the reward with each transfer metric").count() == 1
    screenshot(page, "rewards")
    open_page(page, f"{server}/monitoring?store=toy")
    assert drawn(page, ".js-plotly-plot .trace") >= 1
    # the injected change is highlighted next to the original, as markup we built ourselves
    assert page.locator("mark.lv-new").count() >= 1
    assert page.locator("del.lv-old").count() >= 1
    screenshot(page, "monitoring")
